"""RFC 3161 stamps of sealed heads (SPEC §7), end to end against OpenSSL's own TSA: the CLI
(`init`, `seal`, `timestamp`, `audit`), the service's background stamping with retries,
`verify-proof`'s `timestamp` check, and every fault mode failing open. Every stamp the
project stores must also pass `openssl ts -verify -data <day>.jws -in <day>.tsr`."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capability_anchor import head as heads
from capability_anchor.audit import audit_folder, audit_store
from capability_anchor.errors import Conflict, UsageError
from capability_anchor.export.days import export
from capability_anchor.log import Log
from capability_anchor.log.stamping import Stamper, TsaConfig, stamp_missing
from capability_anchor.service.background import Background
from capability_anchor.timestamp import load_cas
from tests.e2e.test_cli_log import run
from tests.kit import serverkit
from tests.kit.obskit import observation
from tests.kit.tsakit import (
    Pki,
    TestTsa,
    test_tsa,
    verify,
)

ISS = "https://resolver.example"
VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"
FAULTS = tuple(m for m in test_tsa.MODES if m != "ok")
DEADLINE = 1.5


def _days_ago(n: int) -> float:
    today = dt.datetime.now(dt.UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    return (today - dt.timedelta(days=n)).timestamp()


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def past_log(data: Path, config: TsaConfig | None = None) -> list[str]:
    """A log whose first day was two days ago, with entries and a checkpoint on it and
    nothing sealed; returns the two days that sealing now seals."""
    clock = Clock(_days_ago(2))
    stored = config.to_config() if config is not None else None
    with Log.init(data, iss=ISS, clock=clock, config=stored) as log:
        log.append([observation(n, iss=ISS, sub=f"example:{n}") for n in range(3)])
        log.checkpoint()
        first = log.first_day
    second = (dt.date.fromisoformat(first) + dt.timedelta(days=1)).isoformat()
    return [first, second]


def sealed_log(data: Path) -> tuple[Log, list[str]]:
    days = past_log(data)
    log = Log.open(data)
    log.seal()
    return log, days


def config_for(*tsas: TestTsa, deadline: float = DEADLINE) -> TsaConfig:
    return TsaConfig.from_files([t.url for t in tsas], [t.pki.ca_cert for t in tsas], deadline)


def assert_openssl_accepts(log: Log, day: str, ca: Path, tmp: Path, tsa: str | None = None) -> None:
    jws_file = tmp / f"{day}.jws"
    sealed = log.store.sealed_head(day)
    assert sealed is not None
    jws_file.write_bytes(heads.parse_document(sealed.doc).jws.encode("ascii"))
    stamps = [s for s in log.store.stamps(day) if tsa is None or s.tsa == tsa]
    assert stamps
    for s in stamps:
        ok, out = verify(jws_file, s.token, ca)
        assert ok, out


# --- configuration ---------------------------------------------------------------------------


def test_init_stores_the_tsas_and_their_cas(tmp_path: Path, pki_ec: Pki, pki_rsa: Pki) -> None:
    data = tmp_path / "d"
    both = tmp_path / "both.pem"
    both.write_bytes(pki_ec.ca_cert.read_bytes() + pki_rsa.ca_cert.read_bytes())
    result = run(
        "init",
        "--iss",
        ISS,
        "--tsa",
        "http://127.0.0.1:9/",
        "--tsa-ca",
        str(both),
        "--tsa-ca",
        str(pki_ec.ca_cert),  # a duplicate across files is kept once
        data=data,
    )
    assert result.returncode == 0, result.stderr
    with Log.open(data) as log:
        config = TsaConfig.resolve(log.config)
    assert config.urls == ("http://127.0.0.1:9/",)
    assert len(config.cas()) == 2
    # The command line replaces each stored part.
    other = TsaConfig.resolve(
        {"tsa": ["http://a.example/"], "tsa_ca": config.ca_pem}, ["http://b/"]
    )
    assert other.urls == ("http://b/",) and other.ca_pem == config.ca_pem


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tsa", "http://127.0.0.1:9/"], "needs a trusted CA"),
        (["--tsa", "ftp://127.0.0.1/", "--tsa-ca", "CA"], "is not an http"),
        (["--tsa", "http://127.0.0.1:9/", "--tsa-ca", "missing.pem"], "cannot read"),
        (["--tsa", "http://127.0.0.1:9/", "--tsa-ca", "NOTPEM"], "no readable PEM"),
    ],
    ids=["no_ca", "not_http", "missing_ca_file", "not_pem"],
)
def test_init_refuses_a_bad_tsa_configuration(
    tmp_path: Path, pki_ec: Pki, args: list[str], message: str
) -> None:
    (tmp_path / "NOTPEM").write_text("hello")
    args = [
        str(pki_ec.ca_cert)
        if a == "CA"
        else str(tmp_path / a)
        if a in ("NOTPEM", "missing.pem")
        else a
        for a in args
    ]
    data = tmp_path / "d"
    result = run("init", "--iss", ISS, *args, data=data)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not data.exists() or not any(data.iterdir())


def test_timestamp_and_seal_usage_errors_come_before_anything_is_sealed(tmp_path: Path) -> None:
    data = tmp_path / "d"
    past_log(data)
    result = run("timestamp", data=data)
    assert result.returncode == 2 and "no TSA" in result.stderr
    result = run("seal", "--tsa", "http://127.0.0.1:9/", data=data)
    assert result.returncode == 2 and "needs a trusted CA" in result.stderr
    with Log.open(data) as log:
        assert log.store.last_sealed_day() is None  # nothing was sealed


# --- stamping through the CLI ----------------------------------------------------------------


def test_seal_stamps_with_every_tsa_and_openssl_agrees(
    tmp_path: Path, tsa_rsa: TestTsa, tsa_ec: TestTsa
) -> None:
    data = tmp_path / "d"
    days = past_log(data, config_for(tsa_rsa, tsa_ec))
    result = run("seal", data=data)
    assert result.returncode == 0, result.stderr
    sealed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [h["day"] for h in sealed] == days
    assert result.stderr.count("stamped by") == 4, result.stderr
    with Log.open(data) as log:
        for day in days:
            assert [s.tsa for s in log.store.stamps(day)] == [tsa_rsa.url, tsa_ec.url]
            assert_openssl_accepts(log, day, tsa_rsa.pki.ca_cert, tmp_path, tsa_rsa.url)
            assert_openssl_accepts(log, day, tsa_ec.pki.ca_cert, tmp_path, tsa_ec.url)
        before = {day: log.store.stamps(day) for day in days}
    # Nothing is missing now: `timestamp` asks no TSA and changes nothing.
    result = run("timestamp", data=data)
    assert result.returncode == 0 and result.stdout == "", result.stderr
    with Log.open(data) as log:
        assert {day: log.store.stamps(day) for day in days} == before
    # The export is what an auditor checks with openssl alone.
    out = tmp_path / "out"
    assert run("export", str(out), data=data).returncode == 0
    for day in days:
        ok, text = verify(out / f"{day}.jws", out / f"{day}.tsr", tsa_rsa.pki.ca_cert)
        assert ok, text
        listed = json.loads((out / f"{day}.timestamps.json").read_text())["timestamps"]
        assert [s["tsa"] for s in listed] == [tsa_rsa.url, tsa_ec.url]
    cas = ["--tsa-ca", str(tsa_rsa.pki.ca_cert), "--tsa-ca", str(tsa_ec.pki.ca_cert)]
    result = run("audit", "--roots", str(out), *cas, data=data)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["checked"]["stamps"] == 4
    assert report["checked"]["roots_stamps_chained"] == 4
    # Only the RSA CA given: the EC TSA's stamps do not chain to it.
    result = run("audit", "--roots", str(out), "--tsa-ca", str(tsa_rsa.pki.ca_cert))
    assert result.returncode == 1
    assert "does not verify with a chain to a trusted TSA CA" in result.stderr


def test_a_failed_stamp_never_stops_sealing_and_timestamp_retries(
    tmp_path: Path, tsa_ec: TestTsa
) -> None:
    data = tmp_path / "d"
    days = past_log(data)
    tsa_ec.mode = "hang"
    tsa_args = ["--tsa", tsa_ec.url, "--tsa-ca", str(tsa_ec.pki.ca_cert), "--tsa-deadline", "1"]
    started = time.monotonic()
    result = run("seal", *tsa_args, data=data)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["day"] for line in result.stdout.splitlines()] == days
    assert "not stamped by" in result.stderr and "deadline" in result.stderr
    # One deadline for the whole pass: after a TSA's first failure its other days wait.
    assert took < 1 + 5, took
    result = run("timestamp", *tsa_args, data=data)
    assert result.returncode == 1 and "not stamped by" in result.stderr
    with Log.open(data) as log:
        assert all(log.store.stamps(day) == [] for day in days)
    tsa_ec.mode = "ok"
    result = run("timestamp", *tsa_args, data=data)
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(p["day"], p["tsa"]) for p in printed] == [(d, tsa_ec.url) for d in days]
    with Log.open(data) as log:
        for day in days:
            assert_openssl_accepts(log, day, tsa_ec.pki.ca_cert, tmp_path)


# --- every fault, through the library --------------------------------------------------------


FAULT_REASONS = {
    "down": "no or partial reply",
    "hang": "deadline",
    "drip": "deadline",
    "garbage": "not",
    "http500": "HTTP 500",
    "rejection": "refused",
    "other_digest": "message imprint",
    "other_nonce": "nonce",
    "other_ca": "chain",
}


@pytest.mark.parametrize("kind", ["rsa", "ec"])
@pytest.mark.parametrize("mode", FAULTS)
def test_every_fault_stores_nothing_and_a_retry_succeeds(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, mode: str
) -> None:
    tsa: TestTsa = request.getfixturevalue(f"tsa_{kind}")
    log, days = sealed_log(tmp_path / "d")
    with log:
        tsa.mode = mode
        tsa.hang_seconds = 5
        config = config_for(tsa)
        started = time.monotonic()
        results = stamp_missing(log, config)
        assert time.monotonic() - started < DEADLINE + 2
        assert len(results) == 1 and not results[0].ok  # the other day waits for a retry
        error = results[0].error
        assert error is not None and FAULT_REASONS[mode] in error, error
        assert all(log.store.stamps(day) == [] for day in days)
        assert audit_store(log).ok
        tsa.mode = "ok"
        results = stamp_missing(log, config)
        assert [r.day for r in results] == days and all(r.ok for r in results)
        for day in days:
            assert_openssl_accepts(log, day, tsa.pki.ca_cert, tmp_path)
        assert audit_store(log).ok


def test_a_stamp_is_stored_once_per_tsa_and_day(tmp_path: Path, tsa_ec: TestTsa) -> None:
    log, days = sealed_log(tmp_path / "d")
    with log:
        stamp_missing(log, config_for(tsa_ec))
        first = log.store.stamps(days[0])[0]
        # Another process stamped it first: a second stamp from that TSA is not stored.
        assert not log.add_stamp(days[0], tsa_ec.url, b"0", "2026-01-01T00:00:00Z")
        assert log.store.stamps(days[0]) == [first]
        with pytest.raises(Conflict, match="not sealed"):
            log.add_stamp(log.today(), tsa_ec.url, first.token, first.gen_time)


# --- the service -----------------------------------------------------------------------------


def test_the_service_stamps_after_sealing_and_retries_a_failed_tsa(
    tmp_path: Path, tsa_ec: TestTsa
) -> None:
    data = tmp_path / "d"
    days = past_log(data)
    tsa_ec.mode = "down"

    async def scenario() -> None:
        with Log.open(data) as writer:
            stamper = Stamper(writer, config_for(tsa_ec), retry_first=0.3)
            bg = Background(writer, data, checkpoint_interval=3600, stamper=stamper)
            await bg.start()
            for _ in range(50):
                await asyncio.sleep(0.1)
                if writer.store.last_sealed_day() == days[-1]:
                    break
            assert writer.store.last_sealed_day() == days[-1]  # sealed while the TSA is down
            await asyncio.sleep(1.0)
            assert all(writer.store.stamps(d) == [] for d in days)
            tsa_ec.mode = "ok"
            for _ in range(100):
                await asyncio.sleep(0.1)
                if all(writer.store.stamps(d) for d in days):
                    break
            await bg.stop()
            assert all(len(writer.store.stamps(d)) == 1 for d in days)

    asyncio.run(scenario())


def test_serve_stamps_and_publishes_the_stamps(tmp_path: Path, tsa_rsa: TestTsa) -> None:
    data = tmp_path / "d"
    days = past_log(data)
    tsa = ["--tsa", tsa_rsa.url, "--tsa-ca", str(tsa_rsa.pki.ca_cert)]
    with serverkit.serving(data, *tsa) as server, server.client() as client:
        for _ in range(100):
            listed = client.get(f"/roots/{days[0]}/timestamps").json().get("timestamps")
            if listed:
                break
            time.sleep(0.1)
        assert listed and listed[0]["tsa"] == tsa_rsa.url
        der = client.get(f"/roots/{days[0]}/timestamp")
        assert der.status_code == 200
        assert der.headers["content-type"] == "application/timestamp-reply"
        assert der.content == base64.b64decode(listed[0]["token"])
        head = client.get(f"/roots/{days[0]}").json()
    # The service's log has a line per stamp (web/accesslog.py's plain format).
    assert f" info stamping: {days[0]} stamped by {tsa_rsa.url} at " in server.stderr()
    jws_file = tmp_path / "day.jws"
    jws_file.write_text(head["jws"])
    ok, out = verify(jws_file, der.content, tsa_rsa.pki.ca_cert)
    assert ok, out


def test_serve_refuses_a_tsa_without_a_ca_before_listening(tmp_path: Path) -> None:
    data = tmp_path / "d"
    past_log(data)
    server = serverkit.launch(data, "--tsa", "http://127.0.0.1:9/")
    try:
        assert server.wait(30) == 2
    finally:
        server.kill()
    assert "needs a trusted CA" in server.stderr()


# --- verify-proof and audit ------------------------------------------------------------------


@pytest.fixture
def stamped(tmp_path: Path, tsa_ec: TestTsa) -> tuple[Path, Path, TestTsa, list[str]]:
    """A sealed, stamped, exported log and a resolver-2 record of its first day."""
    data = tmp_path / "d"
    log, days = sealed_log(data)
    with log:
        stamp_missing(log, config_for(tsa_ec))
        out = tmp_path / "out"
        export(log, out)
        record = log.proof(days[0], 0)
        entry = log.entries(days[0], 0, 1)[0]
        (tmp_path / "record.json").write_text(
            json.dumps({**entry["claims"], "anchor": record["anchor"], "proof": record["proof"]})
        )
    return data, out, tsa_ec, days


def test_verify_proof_checks_the_stamp(
    tmp_path: Path, stamped: tuple[Path, Path, TestTsa, list[str]], other_pki_ec: Pki
) -> None:
    from capability_anchor.cli.inputs import verify_inputs as verify_record
    from capability_anchor.keys import KeySet

    _, out, tsa, days = stamped
    record = (tmp_path / "record.json").read_bytes()
    keys = KeySet.from_json((out / "keys.json").read_bytes())

    def check(**kwargs: object) -> tuple[str, str]:
        result = verify_record(record, keys=keys, roots=out, **kwargs)  # type: ignore[arg-type]
        check = next(c for c in result.checks if c.name == "timestamp")
        return check.outcome, check.detail

    assert check()[0] == "SKIP"
    status, detail = check(tsa_ca=[str(tsa.pki.ca_cert)])
    assert status == "PASS", detail
    status, detail = check(tsa_ca=[str(other_pki_ec.ca_cert)])
    assert status == "FAIL" and "chain" in detail, detail
    # A stamp of another day's head does not verify for this one.
    listing = out / f"{days[0]}.timestamps.json"
    other = json.loads((out / f"{days[1]}.timestamps.json").read_text())
    doc = json.loads(listing.read_text())
    doc["timestamps"] = other["timestamps"]
    listing.write_text(json.dumps(doc))
    status, detail = check(tsa_ca=[str(tsa.pki.ca_cert)])
    assert status == "FAIL" and "imprint" in detail, detail
    doc["timestamps"] = []
    listing.write_text(json.dumps(doc))
    assert check(tsa_ca=[str(tsa.pki.ca_cert)])[0] == "SKIP"
    with pytest.raises(UsageError):
        check(tsa_ca=[str(tmp_path / "missing.pem")])


def timestamp_check(stdout: str) -> dict[str, str]:
    checks: list[dict[str, str]] = json.loads(stdout)["checks"]
    return next(c for c in checks if c["name"] == "timestamp")


def verify_proof(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERIFY_PROOF), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def test_verify_proof_cli_timestamp_exit_codes(
    tmp_path: Path, stamped: tuple[Path, Path, TestTsa, list[str]], other_pki_ec: Pki
) -> None:
    _, out, tsa, _ = stamped
    record = tmp_path / "record.json"
    base = [record, "--roots", out, "--json"]
    result = verify_proof(*base, "--tsa-ca", tsa.pki.ca_cert)
    assert result.returncode == 0, result.stdout + result.stderr
    assert timestamp_check(result.stdout)["result"] == "PASS"
    result = verify_proof(*base, "--tsa-ca", other_pki_ec.ca_cert)
    assert result.returncode == 1
    assert timestamp_check(result.stdout)["result"] == "FAIL"
    result = verify_proof(*base, "--tsa-ca", tmp_path / "missing.pem")
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_verify_proof_fetches_stamps_from_the_anchor_url(
    tmp_path: Path, stamped: tuple[Path, Path, TestTsa, list[str]]
) -> None:
    """Without --roots the stamps come from `<anchor.url>/timestamps` (here: a real server
    whose public URL the anchors name)."""
    data, out, tsa, days = stamped
    port = serverkit.free_port()
    record = json.loads((tmp_path / "record.json").read_text())
    url = f"http://127.0.0.1:{port}"
    record["anchor"]["url"] = f"{url}/roots/{days[0]}"
    path = tmp_path / "record-url.json"
    path.write_text(json.dumps(record))
    # The history check asks the same server for the head's tlog-proof; its origin is the
    # log's (from its public URL), not the loopback address the anchor names here.
    origin = ["--origin", "resolver.example/history"]
    with serverkit.serving(data, port=port):
        result = verify_proof(
            path, "--keys", out / "keys.json", "--tsa-ca", tsa.pki.ca_cert, "--json", *origin
        )
    assert result.returncode == 0, result.stdout + result.stderr
    check = timestamp_check(result.stdout)
    assert check["result"] == "PASS" and f"{url}/roots/{days[0]}/timestamps" in check["detail"]


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (
            "UPDATE stamps SET token = (SELECT token FROM stamps WHERE day = :other) "
            "WHERE day = :day",
            "stamps another message",
        ),
        ("UPDATE stamps SET gen_time = '2000-01-01T00:00:00Z' WHERE day = :day", "genTime"),
        ("UPDATE stamps SET token = X'3003020100' WHERE day = :day", "not a granted"),
    ],
    ids=["token_of_another_day", "gen_time", "not_a_token"],
)
def test_audit_finds_tampered_stamps(
    stamped: tuple[Path, Path, TestTsa, list[str]], tamper: str, problem: str
) -> None:
    data, _, tsa, days = stamped
    conn = sqlite3.connect(data / "log.sqlite3", isolation_level=None)
    try:
        conn.execute("DROP TRIGGER stamps_no_update")
        conn.execute(tamper, {"day": days[0], "other": days[1]})
    finally:
        conn.close()
    with Log.open(data) as log:
        report = audit_store(log, tsa_ca=load_cas([tsa.pki.ca_cert]))
        assert not report.ok
        assert any(problem in p for p in report.problems), report.problems
        # Without any trusted CA the same tampering is still found.
        report = audit_store(log)
        assert any(problem in p for p in report.problems), report.problems


def test_audit_folder_checks_stamps_against_the_jws(
    stamped: tuple[Path, Path, TestTsa, list[str]],
) -> None:
    _, out, tsa, days = stamped
    assert audit_folder(out).ok
    assert audit_folder(out, tsa_ca=load_cas([tsa.pki.ca_cert])).ok
    (out / f"{days[0]}.tsr").write_bytes((out / f"{days[1]}.tsr").read_bytes())
    doc = json.loads((out / f"{days[0]}.timestamps.json").read_text())
    doc["timestamps"] = json.loads((out / f"{days[1]}.timestamps.json").read_text())["timestamps"]
    (out / f"{days[0]}.timestamps.json").write_text(json.dumps(doc))
    report = audit_folder(out)
    assert any("stamps another message" in p for p in report.problems), report.problems


def test_uvicorn_settings_take_tsas_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from capability_anchor.api import Settings

    monkeypatch.setenv("CAPABILITY_ANCHOR_TSA", "http://a.example/ http://b.example/")
    monkeypatch.setenv("CAPABILITY_ANCHOR_TSA_CA", f"{tmp_path}/a.pem {tmp_path}/b.pem")
    monkeypatch.setenv("CAPABILITY_ANCHOR_TSA_DEADLINE", "2.5")
    settings = Settings.from_env()
    assert settings.tsa == ("http://a.example/", "http://b.example/")
    assert settings.tsa_ca == (tmp_path / "a.pem", tmp_path / "b.pem")
    assert settings.tsa_deadline == 2.5


def test_sigkill_while_stamping_leaves_whole_stamps_only(tmp_path: Path, tsa_ec: TestTsa) -> None:
    """A `timestamp` run killed at any moment stores each stamp whole or not at all; the
    audit passes after every kill and the next run completes the rest."""
    import random
    import signal

    data = tmp_path / "d"
    clock = Clock(_days_ago(6))
    with Log.init(data, iss=ISS, clock=clock, config=config_for(tsa_ec).to_config()) as log:
        log.append([observation(1, iss=ISS, n=1)])
    with Log.open(data) as log:
        log.seal()  # six days, none stamped
    cli = str(Path(sys.executable).parent / "capability-anchor")
    rng = random.Random(20261130)
    cas = load_cas([tsa_ec.pki.ca_cert])
    for _ in range(8):
        proc = subprocess.Popen(
            [cli, "timestamp", "--data", str(data)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Log.open(data) as log:
            report = audit_store(log, tsa_ca=cas)
            assert report.ok, report.problems
    result = run("timestamp", data=data)
    assert result.returncode == 0, result.stderr
    with Log.open(data) as log:
        days = [t[0] for t in log.stamp_targets()]
        assert len(days) == 6
        assert all(len(log.store.stamps(d)) == 1 for d in days)
        assert audit_store(log, tsa_ca=cas).ok


def test_the_retry_schedule_backs_off_per_tsa_and_resets_on_success(
    tmp_path: Path, tsa_ec: TestTsa
) -> None:
    log, days = sealed_log(tmp_path / "d")
    now = [1000.0]
    with log:
        stamper = Stamper(log, config_for(tsa_ec), retry_first=30.0, clock=lambda: now[0])
        assert stamper.due()  # nothing tried yet: a pass at start-up
        tsa_ec.mode = "http500"
        delays = []
        for _ in range(4):
            assert stamper.due()
            assert not stamper.run_once()[0].ok
            delay = stamper._next[tsa_ec.url] - now[0]
            delays.append(delay)
            now[0] += delay
        for n, delay in enumerate(delays):  # 30, 60, 120, 240 s, each within ±20 %
            assert 0.8 * 30 * 2**n <= delay <= 1.2 * 30 * 2**n, delays
        now[0] -= 1
        assert not stamper.due()  # backing off
        stamper.wake()  # a new seal does not cut a failing TSA's backoff short
        assert not stamper.due()
        now[0] += 1
        tsa_ec.mode = "ok"
        assert all(r.ok for r in stamper.run_once())
        assert all(log.store.stamps(d) for d in days)
        assert stamper._failures[tsa_ec.url] == 0
        assert not stamper.due()  # polls again later
        stamper.wake()
        assert stamper.due()


def test_a_stamp_that_cannot_be_stored_is_a_failure_to_retry(
    tmp_path: Path, tsa_ec: TestTsa
) -> None:
    log, days = sealed_log(tmp_path / "d")
    with log:
        conn = sqlite3.connect(tmp_path / "d" / "log.sqlite3", isolation_level=None)
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON stamps BEGIN SELECT RAISE(ABORT, 'full'); END"
        )
        (result,) = stamp_missing(log, config_for(tsa_ec))
        assert result.error is not None and "could not be stored" in result.error
        assert all(log.store.stamps(d) == [] for d in days)
        conn.execute("DROP TRIGGER refuse")
        conn.close()
        assert all(r.ok for r in stamp_missing(log, config_for(tsa_ec)))

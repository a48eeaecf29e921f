"""The data-dir audit reads what it audits without writing, in one snapshot, and checks the
stamp rows no signature covers. Real CLI processes on real SQLite files throughout:

- stamps: a renamed TSA, one token under two names, a stamp stored before its day ended;
- a read-only copy (files 0400 in a 0500 folder, owned by someone else when the tests run as
  root) is audited as it is, with and without its WAL and -shm, and is left byte for byte;
- audits run one after the other while another process appends and checkpoints: every one
  of them passes (each reads one snapshot)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from capability_anchor.audit import datadir as auditdb
from capability_anchor.errors import StoreError
from capability_anchor.log import Log
from capability_anchor.log.stamping import stamp_missing
from capability_anchor.store import SCHEMA_VERSION
from capability_anchor.store import open as stores
from capability_anchor.store.sqlite import DB_NAME
from capability_anchor.store.sqlite.schema import expected_schema
from tests.e2e.test_stamping import config_for, past_log
from tests.kit import paths
from tests.kit.logkit import CLI, DAY5, History, build_history, record, run_cli
from tests.kit.tsakit import TestTsa


def audit(data: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("audit", "--data", data, *extra)


def problems_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    found: list[str] = json.loads(result.stdout)["problems"]
    return found


def sql(data: Path, statement: str, params: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        conn.execute(statement, params)
    finally:
        conn.close()


def update_stamps(data: Path, statement: str, params: tuple[object, ...] = ()) -> None:
    """An UPDATE past the trigger, which is then put back exactly as the schema defines it:
    only the stamp checks can see what changed."""
    (trigger,) = (row[3] for row in expected_schema(SCHEMA_VERSION) if row[1] == "stamps_no_update")
    assert trigger is not None
    sql(data, "DROP TRIGGER stamps_no_update")
    sql(data, statement, params)
    sql(data, trigger)


# --- stamps ------------------------------------------------------------------------------------


@pytest.fixture
def stamped(tmp_path: Path, tsa_ec: TestTsa) -> tuple[Path, list[str], str]:
    """Two sealed days, each stamped by the test TSA, which `init` stored in the config."""
    data = tmp_path / "data"
    config = config_for(tsa_ec)
    days = past_log(data, config)
    with Log.open(data) as log:
        log.seal()
        results = stamp_missing(log, config)
    assert [r.ok for r in results] == [True, True], results
    return data, days, tsa_ec.url


def test_stamped_log_is_clean(stamped: tuple[Path, list[str], str]) -> None:
    data, _, _ = stamped
    result = audit(data)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["checked"]["stamps"] == 2


def test_stamp_renamed_to_a_tsa_the_config_does_not_list(
    stamped: tuple[Path, list[str], str],
) -> None:
    data, days, url = stamped
    update_stamps(
        data, "UPDATE stamps SET tsa = 'https://other-tsa.example/' WHERE day = ?", (days[0],)
    )
    result = audit(data)
    assert result.returncode == 1
    assert problems_of(result) == [
        f"day {days[0]}: the stamp by https://other-tsa.example/: this TSA is not one of the "
        f"stored config's {[url]}"
    ]


def test_stamp_renamed_to_something_that_is_not_a_url(
    stamped: tuple[Path, list[str], str],
) -> None:
    data, days, _ = stamped
    update_stamps(data, "UPDATE stamps SET tsa = 'tsa' WHERE day = ?", (days[1],))
    result = audit(data)
    assert result.returncode == 1
    assert f"day {days[1]}: the stamp by tsa: the TSA name is not an http(s) URL" in (
        problems_of(result)
    )


def test_one_token_stored_under_two_tsa_names(stamped: tuple[Path, list[str], str]) -> None:
    """No trigger refuses it: another (day, tsa) key. A TSA's reply answers one request (its
    nonce), so the same bytes from two TSAs cannot be honest."""
    data, days, url = stamped
    sql(
        data,
        "INSERT INTO stamps (day, tsa, token, gen_time, added) SELECT day, ?, token, gen_time, "
        "added FROM stamps WHERE day = ?",
        (url + "copy", days[0]),
    )
    result = audit(data)
    assert result.returncode == 1
    assert (
        f"one stamp token is stored 2 times: {days[0]} by {url}, {days[0]} by {url}copy"
        in problems_of(result)
    )


def test_stamp_stored_before_its_day_ended(stamped: tuple[Path, list[str], str]) -> None:
    data, days, url = stamped
    update_stamps(data, "UPDATE stamps SET added = 1 WHERE day = ?", (days[0],))
    result = audit(data)
    assert result.returncode == 1
    assert problems_of(result) == [
        f"day {days[0]}: the stamp by {url} was stored at 1, before its day ended "
        "(it stamps the sealed head)"
    ]


def test_a_changed_copy_of_the_ca_inside_a_token(
    stamped: tuple[Path, list[str], str], tsa_ec: TestTsa
) -> None:
    """The token carries the TSA's root too, outside its signature. Verification builds the
    chain from the trusted CA, so a changed copy (here: the last byte of its signature)
    verifies as well as the original; only the check of carried certificates sees it."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    data, days, url = stamped
    ca = x509.load_pem_x509_certificate(tsa_ec.pki.ca_cert.read_bytes()).public_bytes(Encoding.DER)
    conn = sqlite3.connect(data / DB_NAME)
    try:
        ((token,),) = conn.execute("SELECT token FROM stamps WHERE day = ?", (days[0],))
    finally:
        conn.close()
    at = bytes(token).index(ca) + len(ca) - 1
    changed = bytes(token)[:at] + bytes([token[at] ^ 0x01]) + bytes(token)[at + 1 :]
    update_stamps(data, "UPDATE stamps SET token = ? WHERE day = ?", (changed, days[0]))
    result = audit(data)
    assert result.returncode == 1
    assert problems_of(result) == [
        f"day {days[0]}: the stamp by {url} carries a certificate "
        "(CN=Test EC Root CA,O=capability-anchor tests) that no certificate at hand signed"
    ]


def test_stamps_by_a_tsa_given_only_on_the_command_line_are_clean(
    tmp_path: Path, tsa_ec: TestTsa
) -> None:
    """`timestamp --tsa URL` need not store its TSA: with no TSA in the config, a name is
    only checked for being a URL (and renaming one to another URL goes unseen: see
    docs/explanation/decisions/README.md)."""
    data = tmp_path / "data"
    past_log(data)
    with Log.open(data) as log:
        log.seal()
        assert all(r.ok for r in stamp_missing(log, config_for(tsa_ec)))
    result = audit(data)
    assert result.returncode == 0, result.stderr


# --- a read-only copy ------------------------------------------------------------------------

NOBODY = 65534


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("ro"))


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can reach (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="ca-audit-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for sub in path.rglob("*"):
            if sub.is_dir():
                sub.chmod(0o700)
        shutil.rmtree(path)


def _copy_with_wal(history: History, dest: Path, appended: int) -> None:
    """The data dir as it is while a process has it open: entries committed to the WAL but
    not yet copied back into the main file, and its -shm beside it."""
    with Log.open(history.data, clock=history.clock, background_checkpoints=False) as log:
        log.store.execute_raw("PRAGMA wal_autocheckpoint = 0")
        log.append([record(DAY5, n) for n in range(appended)])
        shutil.copytree(history.data, dest)
    assert (dest / (DB_NAME + "-wal")).stat().st_size > 0


def _make_read_only(folder: Path) -> None:
    for path in folder.iterdir():
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)
        path.chmod(0o400)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o500)


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _audit_as_reader(data: Path) -> subprocess.CompletedProcess[str]:
    """As a user who may read the copy but not write to it (root would ignore the modes)."""
    user = NOBODY if os.geteuid() == 0 else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    return subprocess.run(
        [str(CLI), "audit", "--data", str(data)],
        capture_output=True,
        text=True,
        env=env,
        user=user,
        cwd="/",
        check=False,
    )


@pytest.mark.parametrize("shape", ["closed", "wal_and_shm", "wal_without_shm"])
def test_a_read_only_copy_is_audited_and_left_as_it_was(
    history: History, shared_tmp: Path, shape: str
) -> None:
    copy = shared_tmp / "data"
    appended = 0
    if shape == "closed":
        shutil.copytree(history.data, copy)
    else:
        appended = 7
        _copy_with_wal(history.copy(shared_tmp / "live"), copy, appended)
        if shape == "wal_without_shm":
            (copy / (DB_NAME + "-shm")).unlink()
    _make_read_only(copy)
    before = _state(copy)
    result = _audit_as_reader(copy)
    assert result.returncode == 0, result.stderr
    # The entries only the WAL holds were read too (immutable=1 alone would skip them).
    assert json.loads(result.stdout)["checked"]["entries"] == 325 + appended
    assert _state(copy) == before


def test_the_audit_creates_nothing_in_a_closed_writable_data_dir(
    history: History, tmp_path: Path
) -> None:
    """No -wal or -shm appears (SQLite's read-only opening of a WAL database would create
    both when it can): with nothing open, the main file is read as immutable."""
    data = history.copy(tmp_path / "copy").data
    before = _state(data)
    result = audit(data)
    assert result.returncode == 0, result.stderr
    assert _state(data) == before


def test_a_log_opened_while_it_is_read_as_immutable_is_not_given_a_verdict(
    history: History, tmp_path: Path
) -> None:
    """With nothing open, the audit reads the main file as immutable (no locks). A writer
    that starts meanwhile and checkpoints into that file could change pages under the
    reads: then the audit refuses to conclude (exit 2, "run the audit again")."""
    copy = history.copy(tmp_path / "copy")
    store = stores.open_readonly(copy.data)
    try:
        with store.snapshot():
            assert store.engine_findings().version == SCHEMA_VERSION
            with copy.open() as log:  # another writer: appends, then its close checkpoints
                log.append([record(DAY5, 1)])
            with pytest.raises(StoreError, match="run the audit again"):
                store.check_unchanged()
    finally:
        store.close()


def test_the_audit_reads_again_when_a_writer_opened_the_log_under_an_immutable_read(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that opens the log while the audit reads it as immutable, appends and closes
    (checkpointing into the main file): the audit does not report what it read then (it may
    be torn pages, not damage), it reads again and gives the verdict of the log as it is."""
    copy = history.copy(tmp_path / "copy")
    wrote: list[bool] = []
    check_structure = auditdb._check_structure

    def then_a_writer(report: object, store: object) -> object:
        found = check_structure(report, store)  # type: ignore[arg-type]
        if not wrote:  # the first reading only: a real writer, in the middle of it
            wrote.append(True)
            with copy.open() as log:
                log.append([record(DAY5, 1)])
        return found

    monkeypatch.setattr(auditdb, "_check_structure", then_a_writer)
    report = auditdb.audit_data_dir(copy.data)
    assert wrote
    assert report.ok, report.problems


# --- one snapshot while another process writes ----------------------------------------------

WRITER = """
import sys, time
from pathlib import Path
from capability_anchor.errors import StoreError
from capability_anchor.log import Log
from tests.kit.obskit import observation

# Until the test drops the stop file (it has seen the audits it needs) or a safety deadline.
data, stop = Path(sys.argv[1]), Path(sys.argv[2])
end = time.monotonic() + 600
n = 0
with Log.open(data) as log:
    while not stop.exists() and time.monotonic() < end:
        # 37 a batch: tile boundaries (every 256) fall inside batches and between them.
        log.append([observation(n + k, "writer") for k in range(37)])
        n += 37
        if n % 111 == 0:
            log.checkpoint()
print(n)
"""


def test_audits_pass_while_another_process_appends(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stop = tmp_path / "stop"
    init = run_cli("init", "--data", data, "--iss", "https://resolver.example")
    assert init.returncode == 0, init.stderr
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data), str(stop)],
        # The repository root, for tests.kit.obskit.
        env={**os.environ, "PYTHONPATH": str(paths.ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[int] = []
    try:
        time.sleep(0.5)
        while writer.poll() is None:
            result = audit(data)
            assert result.returncode == 0, result.stderr
            seen.append(json.loads(result.stdout)["checked"].get("entries", 0))
            # The writer runs until the audits have seen what the rule needs, however slow
            # the machine: a count of audits, not a fixed time.
            if len(set(seen)) >= 3 and max(seen) > 256:
                stop.touch()
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    # The audits saw the log grow: they ran during the writes, not after them.
    assert len(seen) >= 3 and len(set(seen)) >= 3, seen
    assert seen[0] < int(out) and max(seen) > 256, (seen, out)
    final = audit(data)
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["checked"]["entries"] == int(out)

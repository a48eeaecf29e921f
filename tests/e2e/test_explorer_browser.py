"""The log explorer in headless Chromium, against a real `capability-anchor serve` on 127.0.0.1
(the kit of test_pages.py: every host name but 127.0.0.1 unresolvable, the DOM dumped, a
screenshot, the NetLog read back). The log has three days (two sealed, one with stamps), a
witness policy and a cosigned checkpoint. The browser loads `/`, looks a record up and checks
it with /verify.js: nine verdicts, no FAIL. Through a loopback proxy that answers `/record`
with the same record, one proof hash flipped and signed again with the log's own key, it shows
`FAIL inclusion` and nothing else failed. The JavaScript CLI, given the live log's base as
`--roots`, passes the record and fails the tampered one.

Screenshots: each visit's is saved under the test's tmp folder; with CAPABILITY_ANCHOR_SHOTS=DIR
they are also copied there (docs/images/explorer-*.png were made that way:
`CAPABILITY_ANCHOR_SHOTS=docs/images pytest tests/e2e/test_explorer_browser.py`).
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from capability_anchor import jws
from capability_anchor.log import Log
from capability_anchor.log.issuance import issue_record
from capability_anchor.note import parse_policy
from capability_anchor.verify.checks import CHECK_NAMES
from capability_anchor.witness.client import submit
from tests.e2e.test_pages import CHROMIUM, Visit, assert_not_blank, assert_offline, visit
from tests.kit import paths
from tests.kit.apikit import build_history, insert_stamp, wait_clear_of_midnight
from tests.kit.serverkit import Server, ThreadServer, serving
from tests.kit.systools import ensure_tool
from tests.kit.witnesskit import TestWitness

SUB = "example:a-1"  # in the first day, sealed at 6: a proof path of three hashes
BUDGET_MS = 15000  # virtual time for the page's fetches and checks
VERDICT = re.compile(r'<tr data-check="([a-z_]+)" data-status="(PASS|FAIL|SKIP)">')


@dataclass
class Explored:
    server: Server
    history: Any
    tampered: bytes  # the record of SUB, one proof hash flipped, signed again


def _tamper(log: Log, sub: str) -> bytes:
    record = json.loads(issue_record(log, sub=sub))
    proof = dict(record["proof"])
    first = bytes.fromhex(proof["path"][0])
    proof["path"] = [bytes([first[0] ^ 1]).hex() + first[1:].hex(), *proof["path"][1:]]
    claims = {
        k: v
        for k, v in record.items()
        if k not in ("iat", "exp", "anchor", "proof", "expires", "jws")
    }
    signed = jws.sign_record(
        claims,
        anchor=record["anchor"],
        proof=proof,
        key=log.signing_key(),
        iat=record["iat"],
        lifetime=record["exp"] - record["iat"],
    )
    return json.dumps(signed, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def browser() -> Path:
    return ensure_tool(CHROMIUM, "chromium", "Chromium", timeout=900)


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Explored]:
    wait_clear_of_midnight()  # `serve` reads the system clock
    data = tmp_path_factory.mktemp("explorer") / "data"
    history = build_history(data, service_clock=time.time)
    insert_stamp(data, history.d1, "https://tsa.test/", b"\x30\x00", "2026-01-02T00:00:01Z")
    with Log.open(data) as log, TestWitness("witness.test/w1", log.read.history.vkey()) as w:
        policy = f"witness w1 {w.vkey} {w.url}\nquorum w1\n".encode()
        with log.writer.lock, log.store.write():
            log.store.set_policy(policy, int(log.clock()))
        assert submit(log, parse_policy(policy).witnesses[0]).result == "cosigned"
        tampered = _tamper(log, SUB)
    with serving(data, "--checkpoint-interval", "3600") as server:
        yield Explored(server, history, tampered)


@contextlib.contextmanager
def proxy(upstream: str, record: bytes) -> Iterator[str]:
    """A loopback proxy to `upstream` that answers every `/record` with `record`."""
    target = urlsplit(upstream)

    def answer(request: http.server.BaseHTTPRequestHandler) -> None:
        if request.path.startswith("/record"):
            status, kind, body = 200, "application/json", record
        else:
            conn = http.client.HTTPConnection(target.hostname or "", target.port, timeout=30)
            conn.request("GET", request.path)
            got = conn.getresponse()
            status, kind, body = got.status, got.getheader("content-type", ""), got.read()
            conn.close()
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    server = ThreadServer(answer)
    try:
        yield server.url
    finally:
        server.close()


def _keep(page: Visit, name: str) -> None:
    shots = os.environ.get("CAPABILITY_ANCHOR_SHOTS")
    if shots:
        shutil.copyfile(page.shot_path, Path(shots) / name)


def _section(dom: str) -> str:
    """The lookup's part of the DOM, from its verdict on (what a failure should show)."""
    return dom[dom.find('id="verdict"') :][:2000]


def _verdicts(dom: str) -> dict[str, str]:
    return dict(VERDICT.findall(dom))


def test_the_explorer_home_in_chromium(browser: Path, explored: Explored, tmp_path: Path) -> None:
    h = explored.history
    page = visit(browser, explored.server.url + "/", tmp_path)
    for text in (h.today, h.d1, h.d2, "1, first", "Records per day"):
        assert text in page.dom, text
    assert page.dom.count('class="bar"') == 90
    assert 'data-met="true"' in page.dom and '<tr data-witness="w1">' in page.dom
    assert "<script" not in page.dom  # the home page runs nothing
    assert_offline(page)
    assert_not_blank(page.shot, min_ink=0.3)
    _keep(page, "explorer-home.png")


def test_a_record_verifies_in_chromium(browser: Path, explored: Explored, tmp_path: Path) -> None:
    url = f"{explored.server.url}/?id={SUB}"
    page = visit(browser, url, tmp_path, budget_ms=BUDGET_MS)
    verdicts = _verdicts(page.dom)
    assert tuple(verdicts) == CHECK_NAMES, _section(page.dom)
    assert "FAIL" not in verdicts.values(), verdicts
    assert verdicts["inclusion"] == verdicts["witnesses"] == verdicts["history"] == "PASS"
    assert 'data-ok="true"' in page.dom and "Verified:" in page.dom
    asked = {u.split("?")[0].removeprefix(explored.server.url) for u, _ in page.requests}
    for path in ("/explorer.js", "/verify.js", "/record", "/keys", "/history/policy"):
        assert path in asked, (path, asked)
    assert "/history/proof" in asked and f"/roots/{explored.history.d2}" in asked
    assert_offline(page)
    assert_not_blank(page.shot, min_ink=0.3)
    _keep(page, "explorer-record.png")


def test_a_tampered_record_fails_inclusion_in_chromium(
    browser: Path, explored: Explored, tmp_path: Path
) -> None:
    with proxy(explored.server.url, explored.tampered) as url:
        page = visit(browser, f"{url}/?id={SUB}", tmp_path, budget_ms=BUDGET_MS)
    verdicts = _verdicts(page.dom)
    assert tuple(verdicts) == CHECK_NAMES, _section(page.dom)
    assert [name for name, status in verdicts.items() if status == "FAIL"] == ["inclusion"]
    assert verdicts["record_signature"] == "PASS"  # signed again by the log's own key
    assert 'data-ok="false"' in page.dom and "Not verified: inclusion failed." in page.dom
    assert_offline(page)
    assert_not_blank(page.shot, min_ink=0.3)
    _keep(page, "explorer-tampered.png")


def test_the_javascript_cli_verifies_against_the_live_log(
    explored: Explored, tmp_path: Path
) -> None:
    """`--roots` given the log's base URL: each export file it lacks (`<day>.json`,
    `keys.json`, the tlog-proof) is read from the HTTP API instead, and the record passes;
    the tampered one fails inclusion."""
    node = shutil.which("node")
    assert node is not None, "the README's test command needs Node 18+"
    base = explored.server.url
    with urllib.request.urlopen(f"{base}/record?id={SUB}", timeout=30) as answer:
        (tmp_path / "record.json").write_bytes(answer.read())
    with urllib.request.urlopen(f"{base}/history/policy", timeout=30) as answer:
        (tmp_path / "policy.txt").write_bytes(answer.read())
    (tmp_path / "tampered.json").write_bytes(explored.tampered)
    cli = [node, str(paths.ROOT / "src" / "verify-js" / "bin" / "verify-proof.mjs")]
    options = ["--roots", base, "--policy", str(tmp_path / "policy.txt")]
    run = subprocess.run(
        [*cli, str(tmp_path / "record.json"), *options], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":")[0].split(" ")[1] for line in lines] == list(CHECK_NAMES)
    assert [line.split(" ")[0] for line in lines] == ["PASS"] * 6 + ["SKIP"] + ["PASS"] * 2
    assert f"head from {base}/roots/" in run.stdout
    assert f"tlog-proof from {base}/history/proof?leaf_hash=" in run.stdout
    bad = subprocess.run(
        [*cli, str(tmp_path / "tampered.json"), *options],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL inclusion:" in bad.stdout

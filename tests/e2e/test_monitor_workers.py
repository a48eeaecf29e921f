"""The monitor's head JWS checks in worker processes (`monitor/signatures.py`): they give
exactly the verdicts, in the same order, that the inline path gives, from an export folder
with every kind of bad head and from a real `serve`; a read that fails in a worker is the
same InputError (exit 2) in the monitor, and the state is the same as an inline run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from capability_anchor.errors import InputError
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.monitor import Monitor, MonitorOptions, RunResult, open_source, signatures
from capability_anchor.monitor import state as states
from tests.kit.monitorkit import HandLog
from tests.kit.obskit import observation
from tests.kit.serverkit import serving

DAY = "2026-03-01"


def run(where: str, keys: KeySet, state: Path) -> RunResult:
    source = open_source(where)
    try:
        return Monitor(source, MonitorOptions(keys=keys, state_dir=state)).run_once()
    finally:
        source.close()


def in_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk to the workers, in batches of 3 (several batches, a short last one)."""
    monkeypatch.setattr(signatures, "POOL_MIN", 1)
    monkeypatch.setattr(signatures, "BATCH", 3)


def bad_heads(folder: Path, key: SigningKey) -> HandLog:
    """Heads 1..8 of one day; 2 signed by a stranger, 4's document gone, 6's document the
    one of 5 (its payload is not the leaf), and a history leaf that is no head at all."""
    log = HandLog(folder, key)
    log.entries(DAY, 8)
    for size in range(1, 9):
        log.head(DAY, size, key=SigningKey.generate() if size == 2 else None)
    log.leaves.append(b'{"not":"a head"}')
    log.publish()
    (folder / DAY / "4.json").unlink()
    (folder / DAY / "6.json").write_bytes((folder / DAY / "5.json").read_bytes())
    return log


def test_the_workers_find_what_the_inline_checks_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = SigningKey.generate()
    log = bad_heads(tmp_path / "log", key)
    keys = KeySet.of(key.public)
    inline = run(str(log.folder), keys, tmp_path / "inline")
    in_workers(monkeypatch)
    pooled = run(str(log.folder), keys, tmp_path / "pooled")
    named = [(f["alarm"], f["index"]) for f in inline.findings]
    assert named == [
        ("bad_head_signature", 1),
        ("head_missing", 3),
        ("head_not_leaf", 5),
        ("invalid_head_leaf", 8),
    ], inline.findings
    assert pooled.findings == inline.findings
    inline_state = states.load(tmp_path / "inline").to_json()
    assert states.load(tmp_path / "pooled").to_json() == inline_state


def test_the_workers_over_http_give_the_inline_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(tmp_path / "data", "--rate-limit", "0") as server, server.client() as client:
        for n in range(7):
            answer = client.post(
                "/records?prove=1",
                json={"records": [observation(n, "w", iss=server.url)]},
                headers=server.writer_headers(),
            )
            assert answer.status_code == 200, answer.text
        keys = KeySet.from_json(client.get("/keys").content)
        inline = run(server.url, keys, tmp_path / "inline")
        in_workers(monkeypatch)
        pooled = run(server.url, keys, tmp_path / "pooled")
    assert not inline.alarmed and not pooled.alarmed, (inline.findings, pooled.findings)
    assert pooled.summary == inline.summary and inline.summary["size"] >= 7
    inline_state = states.load(tmp_path / "inline").to_json()
    assert states.load(tmp_path / "pooled").to_json() == inline_state


def test_a_read_that_fails_in_a_worker_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head document that cannot be read (a folder where its file should be) fails in
    the worker; the monitor raises the same InputError and commits no head."""
    key = SigningKey.generate()
    log = HandLog(tmp_path / "log", key)
    log.entries(DAY, 4)
    for size in range(1, 5):
        log.head(DAY, size)
    log.publish()
    doc = log.folder / DAY / "3.json"
    doc.unlink()
    doc.mkdir()
    in_workers(monkeypatch)
    with pytest.raises(InputError, match=r"3\.json"):
        run(str(log.folder), KeySet.of(key.public), tmp_path / "state")
    assert states.load(tmp_path / "state").checked == 0

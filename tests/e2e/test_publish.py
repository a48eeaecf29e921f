"""`serve --publish DIR` (SPEC §13.6): a real service exports the static read path into DIR
as the log grows, the checkpoint last; the folder then audits against the log, and its
checkpoint and heads are the service's own bytes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from capability_anchor.log import Log
from tests.kit.apikit import ISS
from tests.kit.obskit import observation
from tests.kit.serverkit import CLI, serving


def _until(done: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the publish folder did not catch up"
        time.sleep(0.1)


def test_serve_publishes_the_static_read_path_as_the_log_grows(tmp_path: Path) -> None:
    data, folder = tmp_path / "data", tmp_path / "public"
    Log.init(data, iss=ISS).close()
    args = ("--publish", str(folder), "--checkpoint-interval", "1", "--rate-limit", "0")
    with serving(data, *args) as server, server.client() as client:
        for n in range(3):
            answer = client.post(
                "/records?prove=1",
                headers={"Authorization": f"Bearer {server.token()}"},
                json={"records": [observation(n, "pub")]},
            )
            assert answer.status_code == 200, answer.text
            anchor = answer.json()["entries"][0]["anchor"]
            head = folder / anchor["day"] / f"{n + 1}.json"
            _until(lambda head=head: head.exists(), 30)  # type: ignore[misc]
            served = client.get(f"/roots/{anchor['day']}/{n + 1}")
            assert head.read_bytes() == served.content
        checkpoint = client.get("/history/checkpoint").content
        _until(lambda: (folder / "history" / "checkpoint").read_bytes() == checkpoint, 30)
    assert json.loads((folder / "index.json").read_bytes())
    assert list((folder / "history" / "tile").rglob("*")), "no history tiles published"
    audit = subprocess.run(
        [str(CLI), "audit", "--data", str(data), "--roots", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_the_checkpoint_is_written_after_everything_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export's order: a reader of the new checkpoint finds each file it names. The
    writes are the real ones, only watched for their order."""
    from capability_anchor.export import days

    order: list[Path] = []
    for name in ("write_immutable", "write_replaceable"):
        real = getattr(days, name)

        def watched(path: Path, data: bytes, report: object, real: object = real) -> None:
            order.append(path)
            real(path, data, report)  # type: ignore[operator]

        monkeypatch.setattr(days, name, watched)
    data, folder = tmp_path / "data", tmp_path / "public"
    with Log.init(data, iss=ISS) as log:
        log.append([observation(0, "order")])
        log.checkpoint()
        days.export(log, folder, tiles=True)
    assert order[-1] == folder / "history" / "checkpoint"
    assert folder / "index.json" in order[:-1]

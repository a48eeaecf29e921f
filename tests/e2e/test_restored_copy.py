"""A restored copy never signs blind (SPEC §14.2, issue #35 item 3), with real processes only:
the operator CLI, `serve` and the ASGI form (uvicorn) on loopback, SQLite files, and the
session's PostgreSQL for a backup of a log kept there.

The finding: following the operations guide's restore recipe with no `--published` and no
witness policy, a restored backup signed `/roots/<day>/601` over a published 1500, and a head
at size 80 with another root than the published one, with the same key; `/healthz` said ok.

The story here: a log with no witness policy publishes (an export folder, and a mirror serving
a copy of it); `backup` copies it; the original goes on and publishes more; the backup is
restored. Every command that would sign (`serve`, the ASGI form, `checkpoint`, `seal`,
`cosign`) exits 2 naming `--published` and signs nothing; compared with the newer published
state it is behind and signs nothing until `recover`; `--published none` signs; a passing
comparison, or `recover`, clears the mark.
"""

from __future__ import annotations

import json
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from capability_anchor.errors import NotCompared
from capability_anchor.log import Log
from capability_anchor.log.marks import BEHIND_FILE, RESTORED_FILE
from capability_anchor.service.background import TICK_S
from tests.kit.logkit import files_of, heads_of, run_cli
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer
from tests.kit.serverkit import (
    free_port,
    refused_start,
    serve_argv,
    start,
    uvicorn_argv,
)

ISS = "https://resolver.example"
WAIT_S = 30.0  # an upper bound on a refused start, never a measured duration


def ok(*args: str | Path) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def append(data: Path, tag: str, count: int) -> None:
    records = data.parent / f"{data.name}-{tag}.jsonl"
    records.write_text("".join(json.dumps(observation(n, tag)) + "\n" for n in range(count)))
    ok("append", "--data", data, records)


@dataclass
class Story:
    tmp: Path
    data: Path  # the original, grown after the backup
    backup: Path  # `backup` of it at the first published state
    backed_up: dict[str, object]  # what `backup --json` printed
    old: Path  # `export --tiles` at the backup's state: what was published then
    published: Path  # `export --tiles` of the original after it went on

    def restored(self, name: str) -> Path:
        """The operations guide's restore: every file of the backup, copied as it is."""
        data = self.tmp / name
        shutil.copytree(self.backup, data, symlinks=True, copy_function=shutil.copy2)
        return data

    def no_fork(self, data: Path) -> None:
        """No head of `data` has a published (day, size, sealed) with another root."""
        published = heads_of(self.data)
        for key, root in heads_of(data).items():
            if key in published:
                assert published[key] == root, f"head {key} signed with another root: a fork"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    tmp = tmp_path_factory.mktemp("restored")
    data = tmp / "data"
    ok("init", "--data", data, "--iss", ISS)
    append(data, "a", 7)
    ok("checkpoint", "--data", data)
    append(data, "b", 3)
    ok("checkpoint", "--data", data)
    ok("export", tmp / "old", "--tiles", "--data", data)
    backed_up = json.loads(ok("backup", tmp / "backup", "--data", data, "--json"))
    # The original goes on and publishes more: heads at sizes the copy will reach again.
    for tag, count in (("c", 4), ("d", 6)):
        append(data, tag, count)
        ok("checkpoint", "--data", data)
    ok("export", tmp / "published", "--tiles", "--data", data)
    yield Story(tmp, data, tmp / "backup", backed_up, tmp / "old", tmp / "published")


def refused_service(
    data: Path, argv: list[str], port: int, env: dict[str, str] | None = None
) -> str:
    """Run a service form and return its stderr, asserting it exited 2, never listening."""
    return refused_start(data, port, argv, env, wait_s=WAIT_S)


# --- the finding --------------------------------------------------------------------------


def test_a_restored_copy_without_a_published_reference_never_signs_blind(story: Story) -> None:
    """The finding's attack: restore, take records, and try every way to sign. Each exits 2
    naming `--published`; no head is signed; the mark stays."""
    data = story.restored("blind")
    append(data, "after-restore", 5)  # what the attack's head at a published size covered
    before = heads_of(data)
    for command in ("checkpoint", "seal", "cosign"):
        done = run_cli(command, "--data", data)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "--published" in done.stderr and "restored copy" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    port = free_port()
    stderr = refused_service(data, serve_argv(data, port, init=False), port)
    assert "--published" in stderr and "restored copy" in stderr, stderr
    port = free_port()
    stderr = refused_service(
        data, uvicorn_argv(port, 1), port, env={"CAPABILITY_ANCHOR_DATA": str(data)}
    )
    assert "refusing to start" in stderr and "--published" in stderr, stderr
    # A library user who opens the copy and checkpoints is refused where heads are signed.
    with Log.open(data) as log, pytest.raises(NotCompared, match="--published"):
        log.checkpoint()
    assert heads_of(data) == before, "a restored copy signed blind"
    assert (data / RESTORED_FILE).exists()
    story.no_fork(data)


@pytest.mark.parametrize("reference", ["dir", "url"])
def test_a_restored_copy_compared_with_what_was_published_since_signs_nothing_until_recover(
    story: Story, reference: str
) -> None:
    data = story.restored(f"behind-{reference}")
    before = heads_of(data)
    mirror = None
    if reference == "url":
        # The public mirror: a serving copy of the original (what the world reads).
        mirror_data = story.tmp / "mirror"
        if not mirror_data.exists():
            shutil.copytree(story.data, mirror_data)
        port = free_port()
        mirror = start(mirror_data, port=port, argv=serve_argv(mirror_data, port, init=False))
        where = mirror.url
    else:
        where = str(story.published)
    try:
        for command in ("checkpoint", "seal", "cosign"):
            done = run_cli(command, "--published", where, "--data", data)
            assert done.returncode == 1, (command, done.stdout, done.stderr)
            assert "behind what was published" in done.stderr and "recover --from" in done.stderr
        assert heads_of(data) == before
        assert (data / RESTORED_FILE).exists(), "a failed comparison cleared the mark"
        assert json.loads((data / BEHIND_FILE).read_text())["our_size"] == len(before)
        done = run_cli("recover", "--from", where, "--data", data)
        assert done.returncode == 0, done.stderr
    finally:
        if mirror is not None:
            mirror.stop()
    assert not (data / RESTORED_FILE).exists() and not (data / BEHIND_FILE).exists()
    # Recovered: it signs again, after what was published, with no reference needed.
    append(data, f"new-{reference}", 2)
    ok("checkpoint", "--data", data)
    assert len(heads_of(data)) == len(heads_of(story.data)) + 1
    story.no_fork(data)
    assert run_cli("audit", "--data", data).returncode == 0


def test_serve_compares_a_restored_copy_with_its_publish_folder(story: Story) -> None:
    """`serve --publish DIR` where the original published: behind, it starts degraded, signs
    nothing (the mark stays) and writes nothing older into the folder; the folder of the
    backup's own state passes and clears the mark."""
    data = story.restored("publish-behind")
    folder = story.tmp / "publish-behind-folder"
    shutil.copytree(story.published, folder)
    port = free_port()
    server = start(
        data, port=port, argv=serve_argv(data, port, ["--publish", str(folder)], init=False)
    )
    try:
        with server.client() as client:
            health = client.get("/healthz").json()
            assert health["status"] == "degraded" and "behind_published" in health["reason"]
            answer = client.post("/checkpoint", headers=server.writer_headers())
            assert answer.status_code == 503, answer.text
        time.sleep(3 * TICK_S)  # the background's publish would have run by now
    finally:
        server.stop()
    assert (data / RESTORED_FILE).exists()
    # Nothing older was written over what the folder published.
    assert files_of(folder) == files_of(story.published)
    story.no_fork(data)

    data = story.restored("publish-same")
    folder = story.tmp / "publish-same-folder"
    shutil.copytree(story.old, folder)
    port = free_port()
    server = start(
        data, port=port, argv=serve_argv(data, port, ["--publish", str(folder)], init=False)
    )
    try:
        assert not (data / RESTORED_FILE).exists()
        with server.client() as client:
            assert client.get("/healthz").json()["status"] == "ok"
    finally:
        server.stop()
    assert "the restored copy's mark is cleared" in server.stderr()


def test_published_none_states_nothing_was_published_and_signs(story: Story) -> None:
    data = story.restored("none")
    append(data, "none", 3)
    assert run_cli("checkpoint", "--data", data).returncode == 2
    before = heads_of(data)
    ok("checkpoint", "--published", "none", "--data", data)
    assert len(heads_of(data)) == len(before) + 1
    assert not (data / RESTORED_FILE).exists()
    append(data, "none-again", 2)
    ok("checkpoint", "--data", data)  # the mark is gone: no reference needed any more


def test_the_asgi_form_takes_published_none_from_its_environment(story: Story) -> None:
    data = story.restored("asgi-none")
    port = free_port()
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_PUBLISHED": "none"}
    server = start(data, port=port, argv=uvicorn_argv(port, 1), env=env)
    try:
        with server.client() as client:
            assert client.get("/healthz").json()["status"] == "ok"
    finally:
        server.stop()
    assert not (data / RESTORED_FILE).exists()


def test_a_passing_comparison_clears_the_mark(story: Story) -> None:
    """Compared with what was published when the backup was taken (this copy holds it all),
    the copy may sign: the mark is cleared, and the next command needs no reference."""
    data = story.restored("passing")
    ok("checkpoint", "--published", story.old, "--data", data)
    assert not (data / RESTORED_FILE).exists()
    ok("seal", "--data", data)


def test_a_reference_that_cannot_be_read_is_no_comparison(story: Story) -> None:
    data = story.restored("unreadable")
    before = heads_of(data)
    done = run_cli("checkpoint", "--published", story.tmp / "no-such-folder", "--data", data)
    assert done.returncode == 2 and "--published" in done.stderr, done.stderr
    assert "no published reference could be compared" in done.stderr
    assert heads_of(data) == before and (data / RESTORED_FILE).exists()


# --- the mark -----------------------------------------------------------------------------


def test_backup_marks_its_copy_with_the_history_size_it_holds(story: Story) -> None:
    mark = json.loads((story.backup / RESTORED_FILE).read_text())
    assert mark["history_size"] == story.backed_up["history_size"] == 2
    assert mark["history_root"] == story.backed_up["history_root"]
    assert story.backed_up["restored_mark"] == RESTORED_FILE
    assert stat.S_IMODE((story.backup / RESTORED_FILE).stat().st_mode) == 0o600
    # A backup of a marked copy is marked too, and the source's mark is not "not copied".
    copy = story.restored("marked-source")
    done = run_cli("backup", story.tmp / "second-backup", "--data", copy, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["not_copied"] == []
    assert (story.tmp / "second-backup" / RESTORED_FILE).exists()


def test_backup_of_a_postgresql_log_marks_its_copy(postgres: PgServer, tmp_path: Path) -> None:
    data = tmp_path / "pg-data"
    ok(
        "init",
        "--data",
        data,
        "--store",
        postgres.url(postgres.fresh_database("mark")),
        "--iss",
        ISS,
    )
    append(data, "pg", 4)
    ok("checkpoint", "--data", data)
    dest = tmp_path / "pg-backup"
    backed_up = json.loads(ok("backup", dest, "--data", data, "--json"))
    mark = json.loads((dest / RESTORED_FILE).read_text())
    assert mark["history_size"] == backed_up["history_size"] == 1
    done = run_cli("checkpoint", "--data", dest)
    assert done.returncode == 2 and "--published" in done.stderr, done.stderr

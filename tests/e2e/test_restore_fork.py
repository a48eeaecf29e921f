"""A log restored from an older backup cannot fork (SPEC §13.3), with real processes only:
`capability-anchor serve` on loopback, our `witness serve`, the operator CLI, SQLite files.

The story: a log is cosigned by our witness at history size N; the data dir is backed up; the
log grows to N+k, cosigned again, and is exported. The backup is restored over the data dir
and `serve` started on it: before it signs anything it reads the witness's monitoring view,
sees N+k > N, and is *behind*: appends get 503, `/healthz` says degraded, `checkpoint` exits
1 naming `recover`. `recover --from` (a serving mirror's URL, and an export folder) brings
back the entries and heads byte for byte: the export of the recovered data dir is the
published one, file for file. Then new records append and the witness cosigns again.

Attack-named cases: a forged checkpoint on the mirror claiming a larger size does not stop
the log; a mirror whose entries do not match its heads is refused by recover; and no head row
of a restored log ever has a published `(day, size, sealed)` with another root.

The backup is `capability-anchor backup DEST --data D`, taken while `serve` runs; restoring
it, and the published state a mirror holds, are copies of folders (`copy_data_dir`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from capability_anchor.errors import BehindPublished
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log
from capability_anchor.log.marks import BEHIND_FILE, behind_state
from capability_anchor.log.published import monitoring_path
from capability_anchor.note import Checkpoint, NoteSigner, sign_checkpoint
from capability_anchor.witness.client import run_round
from tests.kit.logkit import files_of, heads_of, run_cli
from tests.kit.obskit import observation
from tests.kit.serverkit import Server, free_port, serve_argv, start, uvicorn_argv
from tests.kit.witnesskit import Running, start_witness

WAIT_S = 90.0  # an upper bound on background work, never a measured duration


def copy_data_dir(data: Path, dest: Path) -> None:
    """The backup of a stopped log: every file, modes kept (`cp -a`)."""
    shutil.copytree(data, dest, symlinks=True, copy_function=shutil.copy2)


def restore(backup: Path, data: Path) -> None:
    shutil.rmtree(data)
    copy_data_dir(backup, data)


def serve(data: Path, port: int, *args: str) -> Server:
    return start(
        data,
        port=port,
        argv=serve_argv(data, port, ["--checkpoint-interval", "1", *args], init=False),
        logs=data.parent / "logs",
    )


def post(server: Server, records: list[dict[str, object]]) -> httpx.Response:
    with server.client() as client:
        return client.post("/records", json={"records": records}, headers=server.writer_headers())


def history_size(note: bytes) -> int:
    return int(note.split(b"\n")[1])


@dataclass
class Story:
    """The log of the module docstring, after it grew to N+k."""

    tmp: Path
    data: Path
    port: int
    witness: Running
    origin: str
    backup: Path  # the data dir at size N
    published: Path  # a copy of the data dir at N+k (the mirror serves it)
    export: Path  # `export --tiles` at N+k
    n: int
    n_k: int

    def monitored(self) -> bytes:
        url = f"{self.witness.server.url}/{monitoring_path(self.origin)}"
        answer = httpx.get(url, timeout=10)
        answer.raise_for_status()
        return answer.content

    def wait_cosigned(self, size: int) -> bytes:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                note = self.monitored()
                if history_size(note) >= size:
                    return note
            except httpx.HTTPStatusError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the witness did not cosign size {size} within {WAIT_S} s")
            time.sleep(0.2)


def _grow(server: Server, tag: str, count: int) -> int:
    """Append and publish a head of them; the history's size (one leaf per head) after it."""
    answer = post(server, [observation(i, tag) for i in range(count)])
    assert answer.status_code == 200, answer.text
    with server.client() as client:
        client.post("/checkpoint", headers=server.writer_headers()).raise_for_status()
    return len(heads_of(server.data))


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    tmp = tmp_path_factory.mktemp("restore")
    data, port = tmp / "data", free_port()
    first = start(data, port=port, argv=serve_argv(data, port, ["--checkpoint-interval", "1"]))
    try:
        with first.client() as client:
            vkey = client.get("/history/vkey").text.strip()
    finally:
        first.stop()
    origin = f"127.0.0.1:{port}/history"
    witness = start_witness(tmp, (origin, vkey))
    try:
        policy = tmp / "policy.txt"
        policy.write_text(
            f"witness ours {witness.vkey} {witness.server.url}\nquorum ours\n", encoding="utf-8"
        )
        done = run_cli("policy", policy, "--data", data)
        assert done.returncode == 0, done.stderr
        partial = Story(
            tmp, data, port, witness, origin, tmp / "backup", tmp / "pub", tmp / "export", 0, 0
        )
        server = serve(data, port)
        try:
            _grow(server, "a", 5)
            n = _grow(server, "b", 3)
            partial.wait_cosigned(n)
            # The backup at size N, taken online by the operator's command (issue #21 item 3).
            done = run_cli("backup", partial.backup, "--data", data)
            assert done.returncode == 0, done.stderr
        finally:
            server.stop()
        server = serve(data, port)
        try:
            _grow(server, "c", 4)
            n_k = _grow(server, "d", 6)
            partial.wait_cosigned(n_k)
            # Once the witness's cosignature is stored, /history/checkpoint serves N+k.
            deadline = time.monotonic() + WAIT_S
            with server.client() as client:
                while history_size(client.get("/history/checkpoint").content) < n_k:
                    assert time.monotonic() < deadline, "the cosignature was not stored"
                    time.sleep(0.2)
        finally:
            server.stop()
        copy_data_dir(data, partial.published)
        done = run_cli("export", partial.export, "--tiles", "--data", data)
        assert done.returncode == 0, done.stderr
        partial.n, partial.n_k = n, n_k
        assert n_k > n > 0
        yield partial
    finally:
        witness.server.kill()


def _restored(story: Story, name: str) -> Path:
    data = story.tmp / name
    copy_data_dir(story.backup, data)
    return data


def _no_published_size_with_another_root(story: Story, data: Path) -> None:
    published = heads_of(story.published)
    for key, root in heads_of(data).items():
        if key in published:
            assert published[key] == root, f"head {key} signed with another root: a fork"


def test_a_restored_log_is_behind_refuses_appends_and_signs_nothing(story: Story) -> None:
    data = _restored(story, "behind")
    before = heads_of(data)
    server = serve(data, story.port)
    try:
        with server.client() as client:
            health = client.get("/healthz")
            assert health.status_code == 200
            assert health.json()["status"] == "degraded"
            assert "behind_published" in health.json()["reason"]
            answer = post(server, [observation(0, "after-restore")])
            assert answer.status_code == 503, answer.text
            body = answer.json()
            assert body["error"] == "unavailable" and body["note"].startswith("behind_published")
            assert "recover" in body["note"]
            assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 503
            assert client.get("/record", params={"id": "example:b-0"}).status_code == 503
            scrape = client.get("/metrics").text
            assert "\ncapability_anchor_behind_published 1.0\n" in scrape, scrape
        # recover and a running service never share a data dir: refused, nothing changed.
        done = run_cli("recover", "--from", story.export, "--data", data)
        assert done.returncode == 1 and "a service is running" in done.stderr, done.stderr
        assert behind_state(data) is not None
        # The state is the data dir's: every process of the log sees it.
        state = json.loads((data / BEHIND_FILE).read_text())
        assert state["published_size"] == story.n_k and state["our_size"] == story.n
    finally:
        server.stop()
    events = server.stderr()
    assert events.count("behind what was published: signing stopped") == 1, events
    done = run_cli("checkpoint", "--data", data)
    assert done.returncode == 1 and "recover --from" in done.stderr, done.stderr
    done = run_cli("cosign", "--data", data)
    assert done.returncode == 1 and "recover --from" in done.stderr, done.stderr
    done = run_cli("seal", "--data", data)
    assert done.returncode == 1 and "recover --from" in done.stderr, done.stderr
    assert heads_of(data) == before, "a log behind what it published signed a head"


@pytest.mark.parametrize("source", ["url", "dir"])
def test_recover_brings_back_exactly_what_was_published_then_appends_and_cosigns(
    story: Story, source: str
) -> None:
    data = _restored(story, f"recover-{source}")
    mirror = None
    if source == "url":
        mirror_data = story.tmp / "mirror-url"
        copy_data_dir(story.published, mirror_data)
        mirror = serve(mirror_data, free_port())
        where = mirror.url
    else:
        where = str(story.export)
    try:
        # Learned at start (the witness's monitoring view), then refused until recovered.
        server = serve(data, story.port)
        assert post(server, [observation(0, "early")]).status_code == 503
        server.stop()
        done = run_cli("recover", "--from", where, "--data", data)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["history"]["size"] == story.n_k and out["before"]["size"] == story.n
        assert out["entries"] == 10 and out["heads"] == story.n_k - story.n
        assert not (data / BEHIND_FILE).exists()
    finally:
        if mirror is not None:
            mirror.stop()
    exported = story.tmp / f"export-{source}"
    done = run_cli("export", exported, "--tiles", "--data", data)
    assert done.returncode == 0, done.stderr
    assert files_of(exported) == files_of(story.export), "the recovered log is not the published"
    assert run_cli("audit", "--data", data).returncode == 0
    _no_published_size_with_another_root(story, data)
    if source == "url":
        # Two recovered copies of one log that both append would fork from each other (the
        # witness would see it): the second run goes on.
        return
    server = serve(data, story.port)
    try:
        with server.client() as client:
            assert client.get("/healthz").json()["status"] == "ok"
        answer = post(server, [observation(i, f"new-{source}") for i in range(3)])
        assert answer.status_code == 200, answer.text
        with server.client() as client:
            client.post("/checkpoint", headers=server.writer_headers()).raise_for_status()
        story.wait_cosigned(story.n_k + 1)
    finally:
        server.stop()
    _no_published_size_with_another_root(story, data)


def test_attack_a_forged_checkpoint_on_the_mirror_does_not_stop_the_log(story: Story) -> None:
    """A mirror serving a note under the log's origin, signed by a key the log never had,
    claiming a far larger history: not believed, the log goes on."""
    data = story.tmp / "forged-data"
    copy_data_dir(story.published, data)
    # Not the witness's copy of this log's history (other tests grow it): only the mirror.
    policy = story.tmp / "no-witness.txt"
    policy.write_text("quorum none\n", encoding="utf-8")
    assert run_cli("policy", policy, "--data", data).returncode == 0
    forged = story.tmp / "forged-mirror"
    (forged / "history").mkdir(parents=True)
    origin = story.origin
    note = sign_checkpoint(
        Checkpoint(origin, 10**6, bytes(32)), NoteSigner(origin, SigningKey.generate())
    )
    (forged / "history" / "checkpoint").write_bytes(note)
    server = serve(data, story.port, "--published", str(forged))
    try:
        with server.client() as client:
            assert client.get("/healthz").json()["status"] == "ok"
        answer = post(server, [observation(0, "forged")])
        assert answer.status_code == 200, answer.text
        with server.client() as client:
            client.post("/checkpoint", headers=server.writer_headers()).raise_for_status()
    finally:
        server.stop()
    assert not (data / BEHIND_FILE).exists()
    assert "not believed" in server.stderr()
    done = run_cli("checkpoint", "--published", forged, "--data", data)
    assert done.returncode == 0, done.stderr


def test_attack_a_mirror_whose_entries_do_not_match_its_heads_is_refused(story: Story) -> None:
    data = _restored(story, "tampered")
    tampered = story.tmp / "tampered-export"
    shutil.copytree(story.export, tampered)
    day = json.loads(next(iter(sorted(tampered.glob("*/*.json")))).read_text())["day"]
    # The bundle at the day's newest size (the export keeps one per published size).
    bundles = [p for p in (tampered / day / "tile" / "entries").rglob("*") if p.is_file()]
    bundle = max(bundles, key=lambda p: p.stat().st_size)
    entries, at = [], 0
    raw = bundle.read_bytes()
    while at < len(raw):
        length = int.from_bytes(raw[at : at + 2], "big")
        entries.append(raw[at : at + 2 + length])
        at += 2 + length
    entries[-1], entries[-2] = entries[-2], entries[-1]  # both among the entries to recover
    bundle.write_bytes(b"".join(entries))
    before = heads_of(data)
    done = run_cli("recover", "--from", tampered, "--data", data)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "do not give" in done.stderr or "does not chain" in done.stderr, done.stderr
    assert heads_of(data) == before, "recover stored something from a mirror that fails"


def test_attack_a_mirror_history_signed_by_another_key_is_refused(story: Story) -> None:
    data = _restored(story, "other-key")
    other = story.tmp / "other-key-export"
    shutil.copytree(story.export, other)
    note = sign_checkpoint(
        Checkpoint(story.origin, story.n_k, bytes(32)),
        NoteSigner(story.origin, SigningKey.generate()),
    )
    (other / "history" / "checkpoint").write_bytes(note)
    before = heads_of(data)
    done = run_cli("recover", "--from", other, "--data", data)
    assert done.returncode == 1 and "not the log's" in done.stderr, done.stderr
    assert heads_of(data) == before


def test_attack_a_409_naming_a_larger_size_is_believed_only_through_the_monitoring_view(
    tmp_path: Path,
) -> None:
    """A library user appended to a restored data dir (no service asked first) and signed a
    head: its submission gets our witness's 409 naming the published size. The 409 is not
    signed; the witness's monitoring view shows a checkpoint the log signed, larger than
    ours, so the log is behind and signs nothing more. (A witness that 409s without such a
    view only stops being asked: `test_witnessing`'s 409-larger case.)"""
    data = tmp_path / "data"
    iss = "https://resolver.example"
    Log.init(data, iss=iss, clock=time.time).close()
    with Log.open(data) as log:
        log.append([observation(i, "a") for i in range(3)])
        log.checkpoint()
        vkey, origin = log.read.history.vkey(), log.read.history.origin()
    witness = start_witness(tmp_path, (origin, vkey))
    try:
        policy = tmp_path / "policy.txt"
        policy.write_text(f"witness ours {witness.vkey} {witness.server.url}\nquorum ours\n")
        assert run_cli("policy", policy, "--data", data).returncode == 0
        with Log.open(data) as log:
            assert [o.result for o in run_round(log)] == ["cosigned"]
        copy_data_dir(data, tmp_path / "backup")
        with Log.open(data) as log:
            for tag in ("b", "c", "d"):
                log.append([observation(0, tag)])
                log.checkpoint()
            assert [o.result for o in run_round(log)] == ["cosigned"]
            published = log.store.history_size()
        restore(tmp_path / "backup", data)
        with Log.open(data) as log:
            log.append([observation(0, "after")])
            log.checkpoint()
            ours = log.store.history_size()
            outcomes = run_round(log)
            assert [o.result for o in outcomes] == ["stopped"], outcomes
            state = behind_state(data)
            assert state is not None and state.published_size == published > ours
            with pytest.raises(BehindPublished):
                log.append([observation(1, "after")])
            with pytest.raises(BehindPublished):
                log.checkpoint()
    finally:
        witness.server.kill()


def test_every_uvicorn_worker_of_a_restored_log_refuses_appends(story: Story) -> None:
    """The ASGI form with two workers: each learns at its start (the first one to learn
    writes the state, the other finds it), and both refuse appends; the event line is
    written once."""
    data = _restored(story, "workers")
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1"}
    server = start(
        data, port=story.port, argv=uvicorn_argv(story.port, 2), env=env, logs=data.parent
    )
    try:
        # Separate connections, so that both workers answer some of them.
        for n in range(12):
            with server.client() as client:
                answer = client.post(
                    "/records",
                    json={"records": [observation(n, "workers")]},
                    headers=server.writer_headers(),
                )
                assert answer.status_code == 503, answer.text
                assert client.get("/healthz").json()["status"] == "degraded"
    finally:
        server.stop()
    assert server.stderr().count("behind what was published: signing stopped") == 1
    _no_published_size_with_another_root(story, data)

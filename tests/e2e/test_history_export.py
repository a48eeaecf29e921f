"""SPEC §12.4 export and §12.6 folder audit of the history: `history/checkpoint`, `vkey`,
`policy`, `tile/...`, a tlog-proof beside every head, `export --tiles`; a witness policy with
a quorum met by an older checkpoint; and the folder audit naming each kind of damage.

The folder's tiles are read back by `tilekit.TileClient` (written from the tlog-tiles text,
no product code), which rebuilds the history's root and every day's root from them alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from litestar.testing import TestClient

from capability_anchor.api.app import create_app
from capability_anchor.api.settings import Settings
from capability_anchor.keys import SigningKey
from capability_anchor.log import Log
from capability_anchor.note import Cosigner, parse_note, parse_tlog_proof
from capability_anchor.store import CosignatureRow
from tests.kit.logkit import CLI
from tests.kit.naive_rfc9162 import Naive
from tests.kit.tilekit import Built, TileClient, build, head_key, payload

WITNESS = Cosigner("witness.example/w1", SigningKey.from_seed(hashlib.sha256(b"w1").digest()))
OTHER = Cosigner("witness.example/w2", SigningKey.from_seed(hashlib.sha256(b"w2").digest()))


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("history-export") / "data")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, check=False)


def export(data: Path, out: Path, *extra: str) -> dict[str, object]:
    done = cli("export", "--data", data, out, *extra)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def audit(folder: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return cli("audit", "--data", folder.parent / "no-log", "--roots", folder, *extra)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def folder_fetch(base: Path) -> Callable[[str], bytes]:
    return lambda name: (base / name).read_bytes()


@pytest.fixture(scope="module")
def folder(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "roots"
    export(built.data, out, "--tiles")
    return out


def test_the_folders_tiles_rebuild_the_history_and_every_day(built: Built, folder: Path) -> None:
    leaves = [payload(doc) for doc in built.heads]
    n = len(leaves)
    history = TileClient(folder_fetch(folder / "history"), n)
    assert history.root() == Naive([leaf_hash(x) for x in leaves]).root(n)
    assert history.leaves() == leaves
    newest: dict[str, int] = {}
    for doc in built.heads:
        day, _, size = head_key(doc)
        newest[day] = size
    for day, size in newest.items():
        tiles = TileClient(folder_fetch(folder / day), size)
        sealed_file = folder / f"{day}.json"
        head = sealed_file if sealed_file.exists() else folder / day / f"{size}.json"
        assert tiles.root().hex() == json.loads(head.read_bytes())["root"], day
        assert len(tiles.leaves()) == size


def test_the_exported_checkpoint_and_every_tlog_proof(built: Built, folder: Path) -> None:
    leaves = [payload(doc) for doc in built.heads]
    naive = Naive([leaf_hash(x) for x in leaves])
    checkpoint = (folder / "history" / "checkpoint").read_bytes()
    lines = checkpoint.decode().split("\n")
    assert lines[0] == "resolver.example/history" and int(lines[1]) == len(leaves)
    for index, doc in enumerate(built.heads):
        day, sealed, size = head_key(doc)
        path = folder / (f"{day}.tlog-proof" if sealed else f"{day}/{size}.tlog-proof")
        proof = parse_tlog_proof(path.read_bytes())
        assert proof.extra == json.loads(doc)["jws"].encode()
        assert proof.index == index and proof.note == checkpoint
        assert list(proof.path) == naive.inclusion(index, len(leaves))[0]
    vkey = (folder / "history" / "vkey").read_text()
    assert vkey.startswith("resolver.example/history+") and vkey.endswith("\n")
    assert not (folder / "history" / "policy").exists()  # the log has none


def test_export_tiles_only_with_the_flag(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    export(built.data, out)
    assert (out / "history" / "tile" / "0" / "000").exists()
    assert not list(out.glob("????-??-??/tile"))


def test_a_second_export_changes_nothing(built: Built, folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    shutil.copytree(folder, out)
    before = snapshot(out)
    report = export(built.data, out, "--tiles")
    assert report["written"] == []
    assert snapshot(out) == before


@pytest.mark.parametrize("name", ["history/tile/0/000", "history/tile/entries/001.p/13"])
def test_a_tampered_exported_tile_is_refused(
    built: Built, folder: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "roots"
    shutil.copytree(folder, out)
    target = out / name
    data = target.read_bytes()
    target.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    before = snapshot(out)
    done = cli("export", "--data", built.data, out, "--tiles")
    assert done.returncode == 1
    assert str(target) in done.stderr
    assert snapshot(out) == before  # nothing written


# --- the folder audit -------------------------------------------------------------------------


def test_the_exported_folder_audits_clean(folder: Path) -> None:
    done = audit(folder)
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)["checked"]
    assert checked["roots_history_leaves"] == 269
    assert checked["roots_tlog_proofs"] == 269
    assert checked["roots_history_checkpoint"] == 1


def damaged(folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "roots"
    shutil.copytree(folder, out)
    return out


def flip(path: Path, at: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


def problems(folder: Path, *extra: str | Path) -> str:
    done = audit(folder, *extra)
    assert done.returncode == 1, done.stdout
    return done.stderr


def test_audit_names_a_tampered_tile(folder: Path, tmp_path: Path) -> None:
    out = damaged(folder, tmp_path)
    flip(out / "history" / "tile" / "0" / "001.p" / "13")
    assert "history/tile/0/001.p/13: differs from the history" in problems(out)


def test_audit_names_a_tampered_checkpoint(folder: Path, tmp_path: Path) -> None:
    out = damaged(folder, tmp_path)
    path = out / "history" / "checkpoint"
    text = path.read_text().split("\n")
    text[1] = str(int(text[1]) - 1)  # the size line: the log's signature no longer holds
    path.write_text("\n".join(text))
    assert "history/checkpoint: the checkpoint does not verify" in problems(out)


def test_audit_names_a_missing_head(folder: Path, tmp_path: Path, built: Built) -> None:
    out = damaged(folder, tmp_path)
    day, _, size = head_key(built.heads[100])
    (out / day / f"{size}.json").unlink()
    found = problems(out)
    assert "past the history of the folder's 268 heads" in found
    assert f"{day}/{size}.tlog-proof: no head of the folder has this tlog-proof" in found


def test_audit_names_a_tlog_proof_for_another_head(folder: Path, tmp_path: Path) -> None:
    out = damaged(folder, tmp_path)
    day = sorted(p.stem for p in out.glob("????-??-??.json"))[0]
    other = out / day / "5.tlog-proof"
    shutil.copyfile(other, out / f"{day}.tlog-proof")
    assert f"{day}.tlog-proof: its extra is not the JWS of {day}.json" in problems(out)


def test_audit_names_a_tlog_proof_with_a_flipped_path(folder: Path, tmp_path: Path) -> None:
    out = damaged(folder, tmp_path)
    day = sorted(p.stem for p in out.glob("????-??-??.json"))[0]
    path = out / day / "7.tlog-proof"
    lines = path.read_bytes().split(b"\n")
    proof = parse_tlog_proof(path.read_bytes())
    hashes = [i for i, line in enumerate(lines) if i > 2 and line and i < 3 + len(proof.path)]
    raw = bytearray(base64.b64decode(lines[hashes[0]]))
    raw[0] ^= 1
    lines[hashes[0]] = base64.b64encode(bytes(raw))
    path.write_bytes(b"\n".join(lines))
    assert f"{day}/7.tlog-proof: the inclusion path does not verify" in problems(out)


# --- a witness policy -------------------------------------------------------------------------


def cosign(data: Path, size: int, who: Cosigner, at: int) -> None:
    with Log.open(data, background_checkpoints=False) as log:
        note = parse_note(log.read.history.checkpoint(size))
        line = who.cosign(note.text, at)
        row = CosignatureRow("w1", line.key_id, size, at, line.line().removesuffix("\n"))
        with log.store.write():
            assert log.store.insert_cosignature(row, at)


def set_policy(data: Path, text: str) -> None:
    with Log.open(data, background_checkpoints=False) as log, log.store.write():
        log.store.set_policy(text.encode(), 0)


@pytest.fixture(scope="module")
def witnessed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the log whose policy wants w1, and w1 cosigned only checkpoint 200."""
    data = tmp_path_factory.mktemp("witnessed") / "data"
    shutil.copytree(built.data, data)
    set_policy(data, f"witness w1 {WITNESS.verifier.vkey()}\nquorum w1\n")
    cosign(data, 200, WITNESS, int(built.now))
    return data


def test_the_quorum_checkpoint_is_served_and_exported(
    built: Built, witnessed: Path, tmp_path: Path
) -> None:
    app = create_app(Settings(data_dir=witnessed, background=False, rate_limit=0))
    with TestClient(app) as client:
        served = client.get("/history/checkpoint").content
        assert served.split(b"\n")[1] == b"200"
        assert served == client.get("/history/checkpoint/200").content
        assert served.count("\u2014".encode()) == 2  # the log's line and w1's
        assert client.get("/history/policy").text.startswith("witness w1 ")
        # A head the quorum checkpoint covers is proven against it; a newer one against
        # the newest checkpoint.
        early = leaf_hash(payload(built.heads[10])).hex()
        late = leaf_hash(payload(built.heads[-1])).hex()
        assert (
            parse_tlog_proof(client.get(f"/history/proof?leaf_hash={early}").content).note == served
        )
        newest = parse_tlog_proof(client.get(f"/history/proof?leaf_hash={late}").content).note
        assert newest.split(b"\n")[1] == str(len(built.heads)).encode()
    out = tmp_path / "roots"
    export(witnessed, out)
    assert (out / "history" / "checkpoint").read_bytes() == served
    assert (out / "history" / "policy").read_bytes().startswith(b"witness w1 ")
    policy = tmp_path / "policy.txt"
    policy.write_bytes((out / "history" / "policy").read_bytes())
    done = audit(out, "--policy", policy)
    assert done.returncode == 0, done.stderr
    with_log = cli("audit", "--data", witnessed, "--roots", out, "--policy", policy)
    assert with_log.returncode == 0, with_log.stderr
    other = tmp_path / "other.txt"
    other.write_text(f"witness w2 {OTHER.verifier.vkey()}\nquorum w2\n")
    assert "history/checkpoint: the policy's witnesses" in problems(out, "--policy", other)


def test_verify_proof_reads_the_exported_tlog_proofs(
    built: Built, witnessed: Path, tmp_path: Path
) -> None:
    """SPEC §12.5 checks 8-9 from the folder: `history` passes on the exported tlog-proof;
    with the policy, `witnesses` fails while the quorum lags behind the record's head (w1
    cosigned only checkpoint 200) and passes once w1 cosigns the newest checkpoint."""
    data = tmp_path / "data"  # a copy: w1 cosigns more of it below
    shutil.copytree(witnessed, data)
    out = tmp_path / "roots"
    export(data, out)
    app = create_app(Settings(data_dir=data, background=False, rate_limit=0))
    with TestClient(app) as client:
        served = client.get(f"/record?id=example:server-{built.today}-1")
        assert served.status_code == 200, served.text
    record = tmp_path / "record.json"
    record.write_bytes(served.content)
    iat = str(served.json()["iat"])
    policy = tmp_path / "policy.txt"
    policy.write_bytes((out / "history" / "policy").read_bytes())
    verify = Path(str(CLI).replace("capability-anchor", "verify-proof"))

    def run(*extra: str | Path) -> subprocess.CompletedProcess[str]:
        argv = [str(verify), str(record), "--roots", str(out), "--at", iat, *map(str, extra)]
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    plain = run()
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "PASS history: tlog-proof from" in plain.stdout
    lagging = run("--policy", policy)
    assert lagging.returncode == 1
    assert "FAIL witnesses" in lagging.stdout and "w1" in lagging.stdout
    cosign(data, len(built.heads), WITNESS, int(built.now))
    export(data, out)
    met = run("--policy", policy)
    assert met.returncode == 0, met.stdout + met.stderr
    assert "PASS witnesses" in met.stdout


def test_a_log_without_heads_exports_no_history_and_audits_clean(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "roots"
    assert cli("init", "--iss", "https://resolver.example", "--data", data).returncode == 0
    export(data, out)
    assert not (out / "history").exists()
    done = cli("audit", "--data", data, "--roots", out)
    assert done.returncode == 0, done.stderr


def test_audit_names_a_folder_without_its_history(folder: Path, tmp_path: Path) -> None:
    out = damaged(folder, tmp_path)
    shutil.rmtree(out / "history")
    assert f"{out / 'history'} is missing" in problems(out)

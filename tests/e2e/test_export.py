"""`capability-anchor export DIR` (SPEC §8): the file set, create-or-identical, keys.json the
trusted set, index.json and timestamps rewritten, crashed exports cleaned up."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from capability_anchor import head as heads
from capability_anchor.audit import audit_folder
from capability_anchor.export.days import export as export_folder
from capability_anchor.keys import KeySet, SigningKey
from tests.kit.logkit import (
    CHECKPOINT_SIZES,
    DAY1,
    DAY2,
    DAY3,
    DAY4,
    DAY5,
    DAYS,
    ISS,
    SEALED_SIZES,
    History,
    build_history,
    raw,
    record,
    run_cli,
)

DAY6 = "2026-03-06"

Snapshot = dict[str, tuple[bytes, int]]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("export"))


@pytest.fixture
def history(base: History, tmp_path: Path) -> History:
    return base.copy(tmp_path / "data")


def export(history: History, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("export", "--data", history.data, out)


def exported(history: History, out: Path) -> dict[str, Any]:
    """Export in-process with the library (fast: for setting up a folder)."""
    with history.open() as log:
        report: dict[str, Any] = export_folder(log, out).to_json()
    return report


def exported_cli(history: History, out: Path) -> dict[str, Any]:
    """Export as a user does: the console script, in a process."""
    result = export(history, out)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def snapshot(folder: Path) -> Snapshot:
    """Every file: its bytes and its mtime (ns)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def spec8(names: Iterable[str]) -> set[str]:
    """The files of SPEC §8 among `names` (paths relative to the folder, or absolute ones):
    without the history's files (§12.4, `test_history_export.py`)."""
    return {n for n in names if "history/" not in n and not n.endswith(".tlog-proof")}


def day_files(day: str) -> set[str]:
    return {f"{day}.json", f"{day}.jws", f"{day}.timestamps.json"}


def expected_files(sealed: tuple[str, ...], checkpoints: dict[str, tuple[int, ...]]) -> set[str]:
    names = {"keys.json", "index.json"}
    for day in sealed:
        names |= day_files(day)
    for day, sizes in checkpoints.items():
        names |= {f"{day}/{size}.json" for size in sizes}
    return names


def add_stamp(data: Path, day: str, tsa: str, token: bytes, gen_time: str, added: int) -> None:
    """Stamping is not implemented yet: a stamp row goes in through plain SQL."""
    with raw(data) as conn:
        conn.execute(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (day, tsa, token, gen_time, added),
        )


# --- the file set ----------------------------------------------------------------------------


def test_the_file_set_of_spec_8(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    report = exported_cli(history, out)
    files = set(snapshot(out))
    assert spec8(files) == expected_files(DAYS, CHECKPOINT_SIZES)
    assert sorted(report["written"]) == sorted(str(out / name) for name in files)
    assert report["unchanged"] == 0
    assert not any(name.endswith(".tsr") for name in files)  # no stamps yet

    for day in DAYS:
        doc = (out / f"{day}.json").read_bytes()
        assert doc == history.sealed[day]  # the stored head document, byte for byte
        assert not doc.endswith(b"\n")
        parsed = heads.parse_document(doc)
        assert parsed.day == day and parsed.sealed and parsed.tree_size == SEALED_SIZES[day]
        assert doc == rfc8785.dumps({**parsed.claims, "jws": parsed.jws})  # JCS
        jws = (out / f"{day}.jws").read_bytes()
        assert jws == parsed.jws.encode("ascii")  # compact, no newline: the stamped bytes
        assert jws.count(b".") == 2 and not jws.endswith(b"\n")
        stamps = (out / f"{day}.timestamps.json").read_bytes()
        assert stamps == rfc8785.dumps({"v": "0.2", "day": day, "timestamps": []})

    for day, docs in history.checkpoints.items():
        for doc in docs:
            size = heads.parse_document(doc).tree_size
            assert (out / day / f"{size}.json").read_bytes() == doc

    with history.open() as log:
        assert KeySet.from_json((out / "keys.json").read_bytes()) == log.keyset()
        assert (out / "keys.json").read_bytes() == log.keyset().to_json()


def test_index_json_lists_every_sealed_day_newest_first(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    data = (out / "index.json").read_bytes()
    index = json.loads(data)
    assert data == rfc8785.dumps(index)
    assert list(index) == ["days", "iss", "v"]  # JCS order of exactly {v, iss, days}
    assert (index["v"], index["iss"]) == ("0.2", ISS)
    assert index["days"] == [
        {
            "day": day,
            "tree_size": SEALED_SIZES[day],
            "root": heads.parse_document(history.sealed[day]).claims["root"],
            "url": f"{ISS}/roots/{day}",
        }
        for day in sorted(DAYS, reverse=True)
    ]
    with history.open() as log:  # shaped as /roots
        assert index == log.roots()


def test_the_exported_folder_audits_clean(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    with history.open() as log:
        report = audit_folder(out, log=log)
    assert report.ok, report.problems
    assert report.checked == {
        "days": 4,
        "saved_unsealed_heads": 5,
        "history_leaves": 9,
        "history_tiles": 18,  # 9 partial hash tiles of sizes 1..9 and their entry bundles
        "history_checkpoint": 1,
        "tlog_proofs": 9,
    }


# --- re-export and conflicts -------------------------------------------------------------------


def test_reexport_changes_nothing(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    before = snapshot(out)
    report = exported_cli(history, out)
    assert report == {"written": [], "unchanged": len(before)}
    assert snapshot(out) == before  # same bytes, same mtimes, no file added


@pytest.mark.parametrize(
    "name",
    [f"{DAY2}.json", f"{DAY3}.jws", f"{DAY3}/257.json"],
    ids=["day_json", "day_jws", "saved_checkpoint"],
)
def test_a_different_immutable_file_is_an_error_naming_it(
    history: History, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    target = out / name
    data = target.read_bytes()
    target.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))  # one byte changed
    before = snapshot(out)
    result = export(history, out)
    assert result.returncode == 1
    assert f"{target} exists with different bytes" in result.stderr
    assert snapshot(out) == before  # the edited file kept, nothing else touched


def test_a_failed_export_publishes_nothing_new(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    # The folder as an export made during day 3 left it: days 1-2 sealed, day 3 checkpoints.
    for day in (DAY3, DAY4):
        for name in day_files(day):
            (out / name).unlink()
    index = json.loads((out / "index.json").read_bytes())
    index["days"] = [d for d in index["days"] if d["day"] in (DAY1, DAY2)]
    (out / "index.json").write_bytes(rfc8785.dumps(index))
    with history.open() as log:
        # A clean, older export, but for the history: its files are the newer export's.
        problems = audit_folder(out, log=log).problems
        assert problems
        assert [p for p in problems if "history" not in p and "tlog-proof" not in p] == []
    bad = out / DAY1 / "3.json"
    bad.write_bytes(bad.read_bytes() + b" ")  # a saved checkpoint of day 1 no longer matches
    before = snapshot(out)
    result = export(history, out)
    assert result.returncode == 1
    assert str(bad) in result.stderr
    assert snapshot(out) == before


def test_a_different_keys_json_that_is_not_a_key_set_is_an_error(
    history: History, tmp_path: Path
) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    (out / "keys.json").write_bytes(b'{"keys": "none"}')
    before = snapshot(out)
    result = export(history, out)
    assert result.returncode == 1
    assert f"{out / 'keys.json'} is not a valid JWK set" in result.stderr
    assert snapshot(out) == before


def test_keys_json_is_exactly_the_trusted_set(history: History, tmp_path: Path) -> None:
    """keys.json is the log's trusted set; it only grows because that set does (rotation:
    tests/e2e/test_trust.py, where a keys.json lacking a trusted key gets it back)."""
    out = tmp_path / "roots"
    exported(history, out)
    with history.open() as log:
        log_keys = log.keyset()
    assert (out / "keys.json").read_bytes() == log_keys.to_json()
    assert not (out / "key-records.json").exists()  # written once the log has rotated


def test_a_published_key_the_log_does_not_trust_is_refused_not_carried_on(
    history: History, tmp_path: Path
) -> None:
    """A key published by an older export that the log does not trust (e.g. injected into
    the keys table) would go on signing for the log from the folder: export refuses."""
    out = tmp_path / "roots"
    exported(history, out)
    with history.open() as log:
        log_keys = log.keyset()
    untrusted = SigningKey.generate().public
    (out / "keys.json").write_bytes(KeySet([*log_keys, untrusted]).to_json())
    before = snapshot(out)
    result = export(history, out)
    assert result.returncode == 1
    assert f"publishes key(s) ['{untrusted.kid}'] that the log does not trust" in result.stderr
    assert snapshot(out) == before


# --- crashed exports ---------------------------------------------------------------------------

# A pid no process can have (pids stay below pid_max): the exporter that left these is dead.
# A fixed small pid is not: a long-running machine reuses it.
DEAD = int(Path("/proc/sys/kernel/pid_max").read_text())


def test_stale_temp_files_are_removed_and_never_published(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    (out / f"{DAY2}.json").unlink()  # the crash happened before this file was linked
    stale = [
        out / f".{DAY2}.json.tmp-{DEAD}",
        out / f".index.json.tmp-{DEAD}",
        out / DAY3 / f".300.json.tmp-{DEAD}",
    ]
    for path in stale:
        path.write_bytes(b"half a file")
    exported_cli(history, out)
    assert not any(path.exists() for path in stale)
    assert (out / f"{DAY2}.json").read_bytes() == history.sealed[DAY2]
    assert spec8(snapshot(out)) == expected_files(DAYS, CHECKPOINT_SIZES)
    with history.open() as log:
        assert audit_folder(out, log=log).ok


def test_a_stale_temp_file_is_not_mistaken_for_a_published_file(
    history: History, tmp_path: Path
) -> None:
    """A fresh folder holding only a leftover temp file: export writes the real file."""
    out = tmp_path / "roots"
    out.mkdir()
    (out / f".{DAY1}.json.tmp-{DEAD}").write_bytes(history.sealed[DAY1][:10])
    report = exported_cli(history, out)
    assert str(out / f"{DAY1}.json") in report["written"]
    assert (out / f"{DAY1}.json").read_bytes() == history.sealed[DAY1]
    assert not any(p.name.startswith(".") for p in out.rglob("*"))


# --- the log moves on -------------------------------------------------------------------------


def test_exporting_after_more_days_are_sealed(history: History, tmp_path: Path) -> None:
    out = tmp_path / "roots"
    exported(history, out)
    first = snapshot(out)
    index_before = (out / "index.json").read_bytes()

    with history.open() as log:
        history.clock.set(DAY5, 600)
        log.append([record(DAY5, n) for n in range(3)])
        history.clock.t += 60
        assert log.checkpoint() is not None
    report = exported(history, out)
    assert spec8(report["written"]) == {str(out / DAY5 / "3.json")}
    assert (out / "index.json").read_bytes() == index_before  # no new sealed day yet

    with history.open() as log:
        history.clock.set("2026-03-07", 60)
        sealed = {heads.parse_document(doc).day: doc for doc in log.seal()}
    assert sorted(sealed) == [DAY5, DAY6]
    report = exported_cli(history, out)
    new = day_files(DAY5) | day_files(DAY6)
    assert spec8(report["written"]) == {str(out / n) for n in new} | {str(out / "index.json")}
    for day, doc in sealed.items():
        assert (out / f"{day}.json").read_bytes() == doc
    index = json.loads((out / "index.json").read_bytes())
    assert [d["day"] for d in index["days"]] == [DAY6, DAY5, DAY4, DAY3, DAY2, DAY1]
    assert index["days"][:2] == [
        {
            "day": DAY6,
            "tree_size": 0,
            "root": heads.parse_document(sealed[DAY6]).claims["root"],
            "url": f"{ISS}/roots/{DAY6}",
        },
        {
            "day": DAY5,
            "tree_size": 3,
            "root": heads.parse_document(sealed[DAY5]).claims["root"],
            "url": f"{ISS}/roots/{DAY5}",
        },
    ]
    after = snapshot(out)
    for name, (data, mtime) in first.items():
        if name != "index.json" and (spec8([name]) or "/tile/" in name):
            assert after[name] == (data, mtime), name  # published files untouched
    with history.open() as log:
        assert audit_folder(out, log=log).ok


# --- stamps ------------------------------------------------------------------------------------


def test_stamps_are_exported(history: History, tmp_path: Path) -> None:
    add_stamp(history.data, DAY1, "https://b.example", b"\x30\x01B", "2026-03-02T00:00:09Z", 10)
    add_stamp(history.data, DAY1, "https://a.example", b"\x30\x01A", "2026-03-02T00:00:05Z", 11)
    out = tmp_path / "roots"
    exported_cli(history, out)
    # The earliest *stored* stamp (SPEC §6), whatever the TSAs' clocks say.
    assert (out / f"{DAY1}.tsr").read_bytes() == b"\x30\x01B"
    assert not any((out / f"{day}.tsr").exists() for day in (DAY2, DAY3, DAY4))
    doc = (out / f"{DAY1}.timestamps.json").read_bytes()
    assert json.loads(doc) == {
        "v": "0.2",
        "day": DAY1,
        "timestamps": [
            {
                "tsa": "https://b.example",
                "token": base64.b64encode(b"\x30\x01B").decode(),
                "gen_time": "2026-03-02T00:00:09Z",
            },
            {
                "tsa": "https://a.example",
                "token": base64.b64encode(b"\x30\x01A").decode(),
                "gen_time": "2026-03-02T00:00:05Z",
            },
        ],
    }
    # A later stamp from another TSA rewrites the timestamps file, never the .tsr.
    add_stamp(history.data, DAY1, "https://c.example", b"\x30\x01C", "2026-03-02T00:01:00Z", 12)
    before_tsr = (out / f"{DAY1}.tsr").stat().st_mtime_ns
    report = exported(history, out)
    assert report["written"] == [str(out / f"{DAY1}.timestamps.json")]
    assert (out / f"{DAY1}.tsr").stat().st_mtime_ns == before_tsr
    assert len(json.loads((out / f"{DAY1}.timestamps.json").read_bytes())["timestamps"]) == 3


def test_a_later_stamp_with_an_earlier_gen_time_keeps_export_working(
    history: History, tmp_path: Path
) -> None:
    add_stamp(history.data, DAY1, "https://a.example", b"\x30\x01A", "2026-03-02T00:01:00Z", 10)
    out = tmp_path / "roots"
    exported(history, out)
    # TSA b was down at sealing; its retried stamp arrives later but its clock is behind.
    add_stamp(history.data, DAY1, "https://b.example", b"\x30\x01B", "2026-03-02T00:00:30Z", 20)
    result = export(history, out)
    assert result.returncode == 0, result.stderr
    assert (out / f"{DAY1}.tsr").read_bytes() == b"\x30\x01A"


def test_two_exports_are_identical(history: History, tmp_path: Path) -> None:
    """The folder depends only on the log: two exports give the same bytes."""
    a, b = tmp_path / "a", tmp_path / "b"
    exported_cli(history, a)
    exported(history, b)
    assert {k: v for k, (v, _) in snapshot(a).items()} == {
        k: v for k, (v, _) in snapshot(b).items()
    }

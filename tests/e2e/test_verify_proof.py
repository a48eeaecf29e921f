"""verify-proof (SPEC §9): real inputs built with the library, the real console script.

One log is built per module: day 1 gets 5 entries and an unsealed checkpoint (a record is
taken against it), day 2 gets 3, then both days are sealed and exported. Every attack is a
file derived from the genuine inputs, named after the attack, and must exit 1 naming the
failing check.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from capability_anchor import head as heads
from capability_anchor import jws
from capability_anchor.cli.inputs import InputError, parse_at
from capability_anchor.cli.inputs import verify_inputs as verify
from capability_anchor.encoding import b64url_decode, b64url_encode
from capability_anchor.errors import UsageError
from capability_anchor.export.days import export
from capability_anchor.keys import KeySet, SigningKey
from capability_anchor.log import Log
from capability_anchor.verify.checks import CHECK_NAMES, CHECKS
from tests.kit import paths
from tests.kit.serverkit import free_port
from tests.kit.tsa_server import Pki

VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"
ISS = "https://resolver.example"
DAY1, DAY2, DAY3 = "2026-03-01", "2026-03-02", "2026-03-03"
NAMES = [name for name, _ in CHECKS]


def at(day: str, seconds: int = 0) -> float:
    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
    return start.timestamp() + seconds


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def server(sub: str, day: str) -> dict[str, Any]:
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"example:{sub}",
        "url": f"https://{sub}.example",
        "status": "ok",
        "checked_at": f"{day}T01:00:00Z",
        "evidence": {"probe": sub, "ok": True},
    }


@dataclass
class World:
    root: Path
    folder: Path  # the export
    keys: Path  # folder/keys.json
    record: dict[str, Any]  # sealed anchor (day 1)
    record_at: int
    unsealed: dict[str, Any]  # unsealed anchor (day 1, size 5)
    unsealed_at: int
    key: SigningKey  # the log's key (to forge "validly signed" heads)

    def write(self, name: str, data: bytes | str) -> Path:
        path = self.root / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("verify")
    clock = Clock(at(DAY1, 3600))
    with Log.init(root / "data", iss=ISS, clock=clock) as log:
        log.append([server(f"s{n}", DAY1) for n in range(5)])
        clock.t += 30
        assert log.checkpoint() is not None
        unsealed = log.record(sub="example:s2")
        unsealed_at = int(clock.t)
        clock.t = at(DAY2, 3600)
        log.append([server(f"t{n}", DAY2) for n in range(3)])
        clock.t = at(DAY3, 60)
        log.seal()
        sealed = log.record(sub="example:s3")
        record_at = int(clock.t)
        export(log, root / "export")
        key = log.key
    assert unsealed["anchor"]["url"].endswith(f"/roots/{DAY1}/5")
    assert sealed["anchor"]["url"].endswith(f"/roots/{DAY1}")
    folder = root / "export"
    for day in (DAY1, DAY2):
        assert (folder / f"{day}.json").exists()
    assert (folder / DAY1 / "5.json").exists()
    return World(root, folder, folder / "keys.json", sealed, record_at, unsealed, unsealed_at, key)


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERIFY_PROOF), *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
        timeout=60,
    )


def lines(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    """(result, name) of each check line, in order."""
    out = []
    for line in result.stdout.splitlines():
        outcome, _, rest = line.partition(" ")
        if outcome in ("PASS", "FAIL", "SKIP"):
            out.append((outcome, rest.split(":", 1)[0]))
    return out


def outcome(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    got = lines(result)
    assert [name for _, name in got] == NAMES, result.stdout + result.stderr
    return {name: res for res, name in got}


def token_parts(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    h, p, s = token.split(".")
    return json.loads(b64url_decode(h)), json.loads(b64url_decode(p)), s


def forge(header: dict[str, Any], claims: dict[str, Any], key: SigningKey) -> str:
    """A token with any header, really signed by `key` (so only the header is wrong)."""
    signing_input = (
        b64url_encode(rfc8785.dumps(header)) + "." + b64url_encode(rfc8785.dumps(claims))
    )
    return signing_input + "." + b64url_encode(key.sign(signing_input.encode()))


def unsigned(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("jws", "expires")}


# --- happy paths ------------------------------------------------------------------------------


def test_check_names_agree_everywhere() -> None:
    assert tuple(NAMES) == CHECK_NAMES
    assert NAMES == [
        "record_signature",
        "record_lifetime",
        "leaf",
        "inclusion",
        "head_signature",
        "head_matches",
        "timestamp",
        "history",
        "witnesses",
    ]


@pytest.mark.parametrize("form", ["object", "token", "stdin"])
def test_genuine_record_passes_with_roots(world: World, form: str) -> None:
    if form == "token":
        path = world.write("genuine.jws", world.record["jws"] + "\n")
    else:
        path = world.write("genuine.json", json.dumps(world.record))
    args: list[str | Path] = ["-" if form == "stdin" else path, "--roots", world.folder]
    result = run(*args, "--at", str(world.record_at), stdin=path.read_text())
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    # check 8 reads the tlog-proof export writes beside the head (tests/e2e/test_verify_history.py)
    proved = (world.folder / f"{DAY1}.tlog-proof").exists()
    assert got == {
        **dict.fromkeys(NAMES, "PASS"),
        "timestamp": "SKIP",
        "history": "PASS" if proved else "SKIP",
        "witnesses": "SKIP",
    }
    assert "no --tsa-ca given" in result.stdout


def test_genuine_record_with_head_file_and_keys(world: World) -> None:
    path = world.write("genuine2.json", json.dumps(world.record))
    result = run(
        path,
        "--head",
        world.folder / f"{DAY1}.jws",
        "--keys",
        world.keys,
        "--iss",
        ISS,
        "--at",
        dt.datetime.fromtimestamp(world.record_at, dt.UTC).isoformat(),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unsealed_anchor_reads_the_saved_head(world: World) -> None:
    path = world.write("unsealed.json", json.dumps(world.unsealed))
    result = run(path, "--roots", world.folder, "--at", str(world.unsealed_at))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{DAY1}/5.json" in result.stdout
    # The sealed head of the same size is not the unsealed one the URL names.
    bad = run(
        path,
        "--head",
        world.folder / f"{DAY1}.json",
        "--keys",
        world.keys,
        "--at",
        str(world.unsealed_at),
    )
    assert bad.returncode == 1
    assert outcome(bad)["head_matches"] == "FAIL"


def test_unsigned_record_skips_the_record_checks_and_says_nothing_vouches(world: World) -> None:
    path = world.write("unsigned.json", json.dumps(unsigned(world.record)))
    result = run(path, "--roots", world.folder)
    assert result.returncode == 0, result.stdout + result.stderr
    got = outcome(result)
    assert got["record_signature"] == got["record_lifetime"] == "SKIP"
    assert "nothing vouches for its members beyond the inclusion proof" in result.stdout
    assert "note: RECORD is unsigned: no resolver signature vouches" in result.stdout
    as_json = json.loads(run(path, "--roots", world.folder, "--json").stdout)
    (first,) = [c for c in as_json["checks"] if c["name"] == "record_signature"]
    assert "nothing vouches for its members" in first["detail"]


def test_tsa_ca_without_stamps_skips_and_a_bad_ca_file_is_an_input_error(world: World) -> None:
    path = world.write("tsa.json", json.dumps(world.record))
    sample_ca = paths.ROOT / "roots" / "tsa-ca.pem"
    base = [path, "--roots", world.folder, "--at", str(world.record_at)]
    result = run(*base, "--tsa-ca", sample_ca)
    assert result.returncode == 0
    assert "SKIP" in result.stdout and "no stamp of" in result.stdout
    result = run(*base, "--tsa-ca", world.keys)  # a JWKS, not PEM
    assert result.returncode == 2 and "no readable PEM certificate" in result.stderr


def test_json_output(world: World) -> None:
    path = world.write("json.json", json.dumps(world.record))
    result = run(path, "--roots", world.folder, "--at", str(world.record_at), "--json", "--explain")
    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert set(doc) == {"ok", "checks"}
    assert doc["ok"] is True
    assert [c["name"] for c in doc["checks"]] == NAMES
    for check in doc["checks"]:
        assert set(check) == {"name", "result", "detail"}
        assert check["detail"]
    assert "explain: leaf hash" in result.stderr


def test_explain_narrates_each_hash_step(world: World) -> None:
    path = world.write("explain.json", json.dumps(world.record))
    result = run(path, "--roots", world.folder, "--at", str(world.record_at), "--explain")
    assert result.returncode == 0
    explain = [
        line
        for line in result.stdout.splitlines()
        if line.startswith("explain:") and not line.startswith("explain: history:")
    ]
    leaf = world.record["proof"]
    assert explain[0].startswith("explain: leaf hash = ")
    assert sum("parent = " in line for line in explain) == len(leaf["path"])
    assert f"calculated root = {world.record['anchor']['root']}" in result.stdout
    assert f"expected root   = {world.record['anchor']['root']}" in result.stdout


def test_at_in_the_past_is_not_yet_valid_and_later_expired(world: World) -> None:
    path = world.write("token.jws", world.record["jws"])
    past = run(path, "--roots", world.folder, "--at", "2026-03-01T00:00:00Z")
    assert past.returncode == 1
    assert outcome(past)["record_lifetime"] == "FAIL"
    assert "TokenNotYetValid" in past.stdout
    later = run(path, "--roots", world.folder, "--at", str(world.record_at + 3 * 86400))
    assert later.returncode == 1
    assert outcome(later)["record_lifetime"] == "FAIL"
    assert "TokenExpired" in later.stdout


def test_parse_at() -> None:
    assert parse_at("0") == 0
    assert parse_at("2026-03-01T00:00:00Z") == int(at(DAY1))
    assert parse_at("2026-03-01T01:00:00+01:00") == int(at(DAY1))
    with pytest.raises(UsageError):
        parse_at("yesterday")


# --- plain members beside jws must equal the signed claims --------------------------------------

ROOTS = paths.ROOT / "roots"
SAMPLE = ROOTS / "records" / "2026-11-01-calendar.json"
SAMPLE_AT = "1793797200"


def _hex_digit_changed(text: str) -> str:
    return ("1" if text[0] != "1" else "2") + text[1:]


PLAIN_EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    # The reproduction, on the sample's /record answer.
    "plain_name_edited": (lambda r: r.update(name="Calendar 2"), "name"),
    "plain_leaf_index_edited": (lambda r: r["proof"].update(leaf_index=2), "proof.leaf_index"),
    "plain_path_hex_digit_edited": (
        lambda r: r["proof"]["path"].__setitem__(0, _hex_digit_changed(r["proof"]["path"][0])),
        "proof.path[0]",
    ),
    "plain_v_edited": (lambda r: r.update(v="0.3"), "v"),
    "plain_member_added": (lambda r: r.update(verified_by="nobody"), "verified_by (not signed)"),
    "plain_member_removed": (lambda r: r.pop("status"), "status (signed, missing beside jws)"),
    "plain_nested_member_added": (
        lambda r: r["evidence"].update(extra=1),
        "evidence.extra (not signed)",
    ),
    "plain_true_for_number": (lambda r: r["proof"].update(leaf_index=True), "proof.leaf_index"),
    "plain_number_as_string": (lambda r: r.update(iat=str(r["iat"])), "iat"),
    "plain_anchor_url_edited": (
        lambda r: r["anchor"].update(url="https://evil.example/roots/2026-11-01"),
        "anchor.url",
    ),
    "plain_expires_edited": (lambda r: r.update(expires="2027-11-06T13:00:00Z"), "expires"),
    "plain_expires_not_a_time": (lambda r: r.update(expires="Friday"), "expires"),
    "plain_expires_with_fraction": (
        lambda r: r.update(expires="2026-11-06T13:00:00.5Z"),
        "expires",
    ),
    "plain_only_jws": (
        lambda r: [r.pop(k) for k in list(r) if k != "jws"],
        "v (signed, missing beside jws)",
    ),
}


@pytest.mark.parametrize("attack", sorted(PLAIN_EDITS))
def test_plain_member_edited_beside_jws_fails_record_signature(tmp_path: Path, attack: str) -> None:
    edit, named = PLAIN_EDITS[attack]
    record = json.loads(SAMPLE.read_text())
    edit(record)
    path = tmp_path / f"{attack}.json"
    path.write_text(json.dumps(record, indent=2))
    result = run(path, "--roots", ROOTS, "--at", SAMPLE_AT)
    assert result.returncode == 1, result.stdout + result.stderr
    got = outcome(result)
    assert got["record_signature"] == "FAIL"
    # Only the plain members were edited: everything the signed claims say still verifies.
    assert got["inclusion"] == got["head_matches"] == "PASS", result.stdout
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("FAIL record_signature")]
    assert "plain members differ from its signed claims" in line
    assert named in line, line


def _reorder(record: dict[str, Any]) -> None:
    items = list(record.items())
    record.clear()
    record.update(reversed(items))


@pytest.mark.parametrize(
    ("case", "edit"),
    [
        ("untouched", lambda r: None),
        ("members_reordered", lambda r: _reorder(r)),
        ("expires_as_offset", lambda r: r.update(expires="2026-11-06T15:00:00+02:00")),
        ("expires_with_zero_fraction", lambda r: r.update(expires="2026-11-06T13:00:00.000Z")),
        ("expires_absent", lambda r: r.pop("expires")),
        ("integer_written_as_float", lambda r: r["proof"].update(leaf_index=1.0)),
    ],
)
def test_plain_members_that_say_the_same_pass(
    tmp_path: Path, case: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    record = json.loads(SAMPLE.read_text())
    edit(record)
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(record))
    result = run(path, "--roots", ROOTS, "--at", SAMPLE_AT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the plain members equal the signed claims" in result.stdout


def test_the_sample_record_with_an_edited_name_fails_in_json_too(tmp_path: Path) -> None:
    record = json.loads(SAMPLE.read_text())
    record["name"] = "Calendar 2"
    path = tmp_path / "edited_name.json"
    path.write_text(json.dumps(record))
    result = run(path, "--roots", ROOTS, "--at", SAMPLE_AT, "--json")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    first = doc["checks"][0]
    assert first["name"] == "record_signature" and first["result"] == "FAIL"
    assert first["detail"].endswith("signed claims: name")


# --- attacks: each exits 1 naming the failing check --------------------------------------------


def _flip_last_bits(segment: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return segment[:-1] + alphabet[alphabet.index(segment[-1]) ^ 1]


def _record_field_changed(w: World) -> tuple[Path, list[str]]:
    h, p, s = w.record["jws"].split(".")
    claims = json.loads(b64url_decode(p))
    claims["status"] = "down"
    token = f"{h}.{b64url_encode(rfc8785.dumps(claims))}.{s}"
    return w.write("record_field_changed.json", json.dumps({**w.record, "jws": token})), []


def _unsigned_field_changed(w: World) -> tuple[Path, list[str]]:
    return w.write(
        "unsigned_record_field_changed.json",
        json.dumps({**unsigned(w.record), "status": "down"}),
    ), []


def _mutate_proof(
    name: str, change: Callable[[dict[str, Any]], None]
) -> Callable[[World], tuple[Path, list[str]]]:
    def make(w: World) -> tuple[Path, list[str]]:
        record = json.loads(json.dumps(unsigned(w.record)))
        change(record)
        return w.write(f"{name}.json", json.dumps(record)), []

    return make


def _flip_path(record: dict[str, Any]) -> None:
    first = bytearray(bytes.fromhex(record["proof"]["path"][0]))
    first[0] ^= 0x01
    record["proof"]["path"][0] = first.hex()


def _head_of_another_day(w: World) -> tuple[Path, list[str]]:
    return w.write("head_of_another_day.json", json.dumps(w.record)), [
        "--head",
        str(w.folder / f"{DAY2}.json"),
    ]


def _head_claims(w: World) -> dict[str, Any]:
    return heads.parse_document((w.folder / f"{DAY1}.json").read_bytes()).claims


def _head_foreign_key(w: World) -> tuple[Path, list[str]]:
    forged = heads.sign(_head_claims(w), SigningKey.generate())
    w.write("head_foreign_key.head.json", forged.document())
    return w.write("head_foreign_key.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "head_foreign_key.head.json"),
    ]


def _record_alg(alg: str) -> Callable[[World], tuple[Path, list[str]]]:
    def make(w: World) -> tuple[Path, list[str]]:
        header, claims, _ = token_parts(w.record["jws"])
        token = forge({**header, "alg": alg}, claims, w.key)
        return w.write(f"record_alg_{alg}.jws", token), []

    return make


def _head_alg_none(w: World) -> tuple[Path, list[str]]:
    header, claims, _ = token_parts((w.folder / f"{DAY1}.jws").read_text())
    w.write("head_alg_none.jws", forge({**header, "alg": "none"}, claims, w.key))
    return w.write("head_alg_none.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "head_alg_none.jws"),
    ]


def _record_as_head(w: World) -> tuple[Path, list[str]]:
    w.write("record_as_head.head.jws", w.record["jws"])
    return w.write("record_as_head.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "record_as_head.head.jws"),
    ]


def _head_as_record(w: World) -> tuple[Path, list[str]]:
    return w.write("head_as_record.jws", (w.folder / f"{DAY1}.jws").read_bytes()), [
        "--head",
        str(w.folder / f"{DAY1}.json"),
    ]


def _head_root_disagrees(w: World) -> tuple[Path, list[str]]:
    claims = {**_head_claims(w), "root": "ab" * 32}
    w.write("head_root_disagrees.head.json", heads.sign(claims, w.key).document())
    return w.write("head_root_disagrees.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "head_root_disagrees.head.json"),
    ]


def _head_size_disagrees(w: World) -> tuple[Path, list[str]]:
    claims = {**_head_claims(w), "tree_size": 6}
    w.write("head_size_disagrees.head.json", heads.sign(claims, w.key).document())
    return w.write("head_size_disagrees.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "head_size_disagrees.head.json"),
    ]


def _truncated_record(w: World) -> tuple[Path, list[str]]:
    return w.write("truncated_record.jws", w.record["jws"][:-10]), []


def _truncated_head(w: World) -> tuple[Path, list[str]]:
    w.write("truncated_head.jws", (w.folder / f"{DAY1}.jws").read_text()[:-10])
    return w.write("truncated_head.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "truncated_head.jws"),
    ]


def _trailing_garbage_record(w: World) -> tuple[Path, list[str]]:
    return w.write("trailing_garbage_record.jws", w.record["jws"] + ".garbage"), []


def _trailing_garbage_head(w: World) -> tuple[Path, list[str]]:
    w.write("trailing_garbage_head.json", (w.folder / f"{DAY1}.json").read_bytes() + b"x")
    return w.write("trailing_garbage_head.rec.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "trailing_garbage_head.json"),
    ]


def _non_canonical_b64_record(w: World) -> tuple[Path, list[str]]:
    h, p, s = w.record["jws"].split(".")
    return w.write("non_canonical_base64url.jws", f"{h}.{p}.{_flip_last_bits(s)}"), []


def _non_canonical_b64_head(w: World) -> tuple[Path, list[str]]:
    h, p, s = (w.folder / f"{DAY1}.jws").read_text().split(".")
    w.write("non_canonical_base64url_head.jws", f"{h}.{p}.{_flip_last_bits(s)}")
    return w.write("non_canonical_base64url_head.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "non_canonical_base64url_head.jws"),
    ]


def _expired(w: World) -> tuple[Path, list[str]]:
    return w.write("expired_record_token.jws", w.record["jws"]), [
        "--at",
        str(w.record_at + 49 * 3600),
    ]


def _iss_differs(w: World) -> tuple[Path, list[str]]:
    _, claims, _ = token_parts(w.record["jws"])
    claims["iss"] = "https://other.example"
    token = jws.sign_claims(claims, w.key, jws.RECORD_TYP)
    return w.write("record_iss_differs.jws", token), []


def _head_not_json(w: World) -> tuple[Path, list[str]]:
    w.write("head_bad_json.head.json", "{not json")
    return w.write("head_bad_json.json", json.dumps(w.record)), [
        "--head",
        str(w.root / "head_bad_json.head.json"),
    ]


def _iss_option(w: World) -> tuple[Path, list[str]]:
    return w.write("iss_option_differs.json", json.dumps(w.record)), [
        "--iss",
        "https://other.example",
    ]


ATTACKS: dict[str, tuple[Callable[[World], tuple[Path, list[str]]], str]] = {
    "record_field_changed": (_record_field_changed, "record_signature"),
    "unsigned_record_field_changed": (_unsigned_field_changed, "inclusion"),
    "path_element_bit_flipped": (_mutate_proof("path_bit_flipped", _flip_path), "inclusion"),
    "leaf_index_changed": (
        _mutate_proof("leaf_index_changed", lambda r: r["proof"].update(leaf_index=2)),
        "inclusion",
    ),
    "tree_size_changed": (
        _mutate_proof("tree_size_changed", lambda r: r["proof"].update(tree_size=6)),
        "head_matches",
    ),
    "proof_against_head_of_another_day": (_head_of_another_day, "head_matches"),
    "head_signed_by_unknown_key": (_head_foreign_key, "head_signature"),
    "record_alg_none": (_record_alg("none"), "record_signature"),
    "record_alg_HS256": (_record_alg("HS256"), "record_signature"),
    "record_alg_Ed25519": (_record_alg("Ed25519"), "record_signature"),
    "head_alg_none": (_head_alg_none, "head_signature"),
    "record_token_as_head": (_record_as_head, "head_signature"),
    "head_as_record_token": (_head_as_record, "record_signature"),
    "head_root_disagrees_with_anchor": (_head_root_disagrees, "head_matches"),
    "head_tree_size_disagrees_with_anchor": (_head_size_disagrees, "head_matches"),
    "truncated_record_jws": (_truncated_record, "record_signature"),
    "truncated_head_jws": (_truncated_head, "head_signature"),
    "trailing_garbage_record": (_trailing_garbage_record, "record_signature"),
    "trailing_garbage_head": (_trailing_garbage_head, "head_signature"),
    "non_canonical_base64url_record": (_non_canonical_b64_record, "record_signature"),
    "non_canonical_base64url_head": (_non_canonical_b64_head, "head_signature"),
    "expired_record_token": (_expired, "record_lifetime"),
    "record_iss_differs_from_head": (_iss_differs, "head_matches"),
    "iss_option_differs": (_iss_option, "head_matches"),
    "head_bad_json": (_head_not_json, "head_signature"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack_is_rejected(world: World, attack: str) -> None:
    make, failing = ATTACKS[attack]
    path, extra = make(world)
    args = [path, "--roots", world.folder, *extra]
    if "--at" not in extra:
        args += ["--at", str(world.record_at)]
    result = run(*args)
    assert result.returncode == 1, result.stdout + result.stderr
    got = outcome(result)
    assert got[failing] == "FAIL", result.stdout
    if attack == "record_iss_differs_from_head":
        assert "record iss" in result.stdout


def test_unsealed_anchor_url_against_sealed_head_is_caught_by_library(world: World) -> None:
    keys = KeySet.from_json(world.keys.read_bytes())
    data = json.dumps(world.unsealed).encode()
    result = verify(data, keys=keys, roots=world.folder, at=world.unsealed_at)
    assert result.ok
    forged = heads.sign({**_head_claims(world), "sealed": False}, world.key)
    head_file = world.write("unsealed_as_sealed.json", forged.document())
    sealed_form = json.dumps(world.record).encode()
    result = verify(sealed_form, keys=keys, head=str(head_file), at=world.record_at)
    assert not result.ok
    assert dict((n, r) for n, r, _ in result.checks)["head_matches"] == "FAIL"


# --- exit 2: usage and I/O ------------------------------------------------------------------


def test_no_keys_exits_2(world: World) -> None:
    path = world.write("nokeys.json", json.dumps(world.record))
    result = run(path, "--head", world.folder / f"{DAY1}.json")
    assert result.returncode == 2
    assert "no trusted keys" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "case",
    [
        "missing_record",
        "malformed_record",
        "malformed_keys",
        "missing_keys",
        "missing_head",
        "unreachable_head",
        "empty_object",
        "bad_at",
        "missing_roots_head",
        "json_array",
        "empty_file",
    ],
)
def test_usage_and_io_errors_exit_2(world: World, case: str) -> None:
    record = world.write("io.json", json.dumps(world.record))
    args: list[str | Path] = [record, "--roots", world.folder]
    if case == "missing_record":
        args[0] = world.root / "nope.json"
    elif case == "malformed_record":
        args[0] = world.write("malformed_record.json", '{"anchor": {}, "anchor": {}}')
    elif case == "malformed_keys":
        args += ["--keys", world.write("malformed_keys.json", "{bad")]
    elif case == "missing_keys":
        args += ["--keys", world.root / "nokeys.json"]
    elif case == "missing_head":
        args += ["--head", world.root / "nohead.json"]
    elif case == "unreachable_head":
        args += ["--head", "http://127.0.0.1:9/roots/x"]
    elif case == "empty_object":
        args[0] = world.write("empty.json", "{}")
    elif case == "empty_file":
        args[0] = world.write("empty_file.json", "\n")
    elif case == "json_array":
        args[0] = world.write("array.json", "[1, 2]")
    elif case == "bad_at":
        args += ["--at", "tomorrow"]
    elif case == "missing_roots_head":
        other = world.root / "emptyroots"
        other.mkdir(exist_ok=True)
        (other / "keys.json").write_bytes(world.keys.read_bytes())
        args[2] = other
    result = run(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("verify-proof: ")


def test_malformed_roots_keys_json_exits_2(world: World) -> None:
    folder = world.root / "badkeys"
    folder.mkdir(exist_ok=True)
    (folder / "keys.json").write_text('{"keys": [')
    result = run(world.write("badkeys.json", json.dumps(world.record)), "--roots", folder)
    assert result.returncode == 2


def test_library_raises_input_error_for_io(world: World) -> None:
    keys = KeySet.from_json(world.keys.read_bytes())
    with pytest.raises(InputError):
        verify(b"{bad", keys=keys, roots=world.folder)
    with pytest.raises(InputError):
        verify(json.dumps(world.record).encode(), keys=keys, head=str(world.root / "none"))


def test_library_reports_all_seven_for_a_garbage_token(world: World) -> None:
    keys = KeySet.from_json(world.keys.read_bytes())
    result = verify(b"not-a-token", keys=keys, roots=world.folder)
    assert [n for n, _, _ in result.checks] == NAMES
    assert not result.ok
    for _, res, detail in result.checks:
        assert res in ("PASS", "FAIL", "SKIP")
        assert detail


# --- import hygiene and speed -------------------------------------------------------------


def test_offline_run_imports_no_server_storage_or_http_code(world: World) -> None:
    path = world.write("imports.json", json.dumps(world.record))
    code = (
        "import sys\n"
        "from capability_anchor.cli.verify_proof import main\n"
        f"rc = main([{str(path)!r}, '--roots', {str(world.folder)!r}, '--at', "
        f"'{world.record_at}'])\n"
        "bad = [m for m in ('litestar', 'sqlite_utils', 'sqlite3', 'httpx') if m in sys.modules]\n"
        "print('RC', rc, 'LOADED', ','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "RC 0 LOADED "


def test_help_lists_checks_exit_codes_and_every_option_with_its_default() -> None:
    result = run("--help")
    assert result.returncode == 0
    options, _, epilog = result.stdout.partition("checks, always all listed, in this order:")
    checks, _, codes = " ".join(epilog.split()).partition("exit codes:")
    # The checks come from the library's one tuple, in order, each with its description.
    expected = " ".join(f"{n}. {name}: {what}" for n, (name, what) in enumerate(CHECKS, 1))
    assert checks.strip() == expected
    assert codes.strip().startswith("0 every check that ran passed")
    assert codes.index(" 1 a check failed") < codes.index(" 2 usage or I/O error")
    assert "malformed JSON in RECORD, --keys or keys.json" in codes
    # Every option has a help line that says its default (-h and --version aside).
    flat = " ".join(options.split())
    options_with_defaults = (
        "--head",
        "--roots",
        "--keys",
        "--iss",
        "--tsa-ca",
        "--at",
        "--history-proof",
        "--policy",
        "--origin",
        "--json",
    )
    for option in options_with_defaults:
        start = flat.index(f" {option} ", flat.index("options:"))
        text = flat[start:].split(" --", 2)[1]
        assert "(default:" in text, (option, text)
    assert "(default: off)" in flat.split("--explain", 2)[-1]


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"verify-proof {version('capability-anchor')}"


def test_base64_helper_sanity() -> None:
    # _flip_last_bits makes a different spelling that still decodes with a lax decoder.
    sig = b64url_encode(bytes(64))
    flipped = _flip_last_bits(sig)
    assert flipped != sig
    assert base64.urlsafe_b64decode(flipped + "==") == bytes(64)


# --- over HTTP: --head URL, --keys URL, and anchor.url -----------------------------------------


@pytest.fixture(scope="module")
def site(world: World) -> Iterator[str]:
    """`python -m http.server` on 127.0.0.1 serving the export folder, plus `roots/<day>`
    (the anchor URL form) as copies of the exported head documents."""
    root = world.root / "site"
    shutil.copytree(world.folder, root)
    (root / "roots").mkdir()
    shutil.copy(world.folder / f"{DAY1}.json", root / "roots" / DAY1)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield base
    finally:
        proc.kill()
        proc.wait()


def test_head_and_keys_over_http(world: World, site: str) -> None:
    path = world.write("http.json", json.dumps(world.record))
    result = run(
        path,
        "--head",
        f"{site}/{DAY1}.json",
        "--keys",
        f"{site}/keys.json",
        "--at",
        str(world.record_at),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"head from {site}/{DAY1}.json" in result.stdout


def test_head_from_anchor_url(world: World, site: str) -> None:
    record = unsigned(world.record)
    record["anchor"] = {**record["anchor"], "url": f"{site}/roots/{DAY1}"}
    path = world.write("anchor_url.json", json.dumps(record))
    result = run(path, "--keys", world.keys)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"head from {site}/roots/{DAY1}" in result.stdout


def test_http_404_exits_2(world: World, site: str) -> None:
    path = world.write("http404.json", json.dumps(world.record))
    result = run(path, "--head", f"{site}/nope.json", "--keys", world.keys)
    assert result.returncode == 2
    assert "HTTP 404" in result.stderr


def test_bad_token_skips_head_unless_head_given(world: World) -> None:
    keys = KeySet.from_json(world.keys.read_bytes())
    result = verify(b"a.b.c", keys=keys, roots=world.folder)
    assert dict((n, r) for n, r, _ in result.checks)["head_signature"] == "SKIP"
    result = verify(b"a.b.c", keys=keys, head=str(world.folder / f"{DAY1}.json"))
    assert dict((n, r) for n, r, _ in result.checks)["head_signature"] == "PASS"


def test_start_up_and_offline_verification_are_quick(world: World) -> None:
    """Loose bounds (the goals, 150 ms and 250 ms, are in tools/bench_verify.py): catches a
    heavy import sneaking into the verifying path without flaking on a busy machine (the
    child's CPU time, which other processes do not inflate)."""
    path = world.write("timing.json", json.dumps(world.record))

    def cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    def best(*args: str | Path) -> float:
        times = []
        for _ in range(3):
            start = cpu()
            run(*args)
            times.append(cpu() - start)
        return min(times)

    assert best("--help") < 1.0
    assert best(path, "--roots", world.folder, "--at", str(world.record_at)) < 2.0


# --- trusted keys whose kid is not their RFC 7638 thumbprint ----------------------------------


def _jwk_as(key: SigningKey, kid: str) -> dict[str, Any]:
    return {"kty": "OKP", "crv": "Ed25519", "x": key.public.x, "kid": kid}


def _resigned_as(w: World, kid: str) -> tuple[Path, Path]:
    """The genuine record and its sealed head, signed again by the log's key under `kid`
    (another resolver's key set that names its key otherwise)."""
    header, claims, _ = token_parts(w.record["jws"])
    record = {**w.record, "jws": forge({**header, "kid": kid}, claims, w.key)}
    head_header, head_claims, _ = token_parts((w.folder / f"{DAY1}.jws").read_text())
    head = forge({**head_header, "kid": kid}, head_claims, w.key)
    return (
        w.write(f"resigned_{kid}.json", json.dumps(record)),
        w.write(f"resigned_{kid}.head.jws", head),
    )


def test_keys_with_a_non_thumbprint_kid_verify_with_a_notice(world: World) -> None:
    record, head = _resigned_as(world, "other")
    keys = world.write("keys_other.json", json.dumps({"keys": [_jwk_as(world.key, "other")]}))
    result = run(record, "--head", head, "--keys", keys, "--at", str(world.record_at))
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result)["record_signature"] == outcome(result)["head_signature"] == "PASS"
    assert "notice:" in result.stderr and "kid 'other' is not its RFC 7638" in result.stderr
    assert world.key.kid in result.stderr  # the notice names the thumbprint too


def test_a_renamed_key_does_not_verify_tokens_that_name_its_thumbprint(world: World) -> None:
    """Matched by kid: the log's tokens name the thumbprint, which this key set does not."""
    path = world.write("renamed_key.json", json.dumps(world.record))
    keys = world.write("keys_renamed.json", json.dumps({"keys": [_jwk_as(world.key, "other")]}))
    result = run(path, "--roots", world.folder, "--keys", keys, "--at", str(world.record_at))
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcome(result)["record_signature"] == "FAIL"
    assert "UnknownKeyError" in result.stdout


def test_kid_naming_another_key_fails_the_head(world: World) -> None:
    """An attacker's key set lists its own key under the log's kid: the log's head then
    fails (exit 1), as a wrong key should; so does a head the attacker signs."""
    evil = SigningKey.generate()
    keys = world.write(
        "keys_kid_names_another_key.json",
        json.dumps({"keys": [_jwk_as(evil, world.key.kid)]}),
    )
    path = world.write("kid_names_another_key.json", json.dumps(world.record))
    result = run(path, "--roots", world.folder, "--keys", keys, "--at", str(world.record_at))
    assert result.returncode == 1, result.stdout + result.stderr
    got = outcome(result)
    assert got["record_signature"] == "FAIL" and "SignatureMismatch" in result.stdout
    head = run(
        path,
        "--head",
        world.folder / f"{DAY1}.json",
        "--keys",
        keys,
        "--at",
        str(world.record_at),
    )
    assert head.returncode == 1
    assert outcome(head)["head_signature"] == "FAIL"


def test_two_different_keys_under_one_kid_exit_2(world: World) -> None:
    keys = world.write(
        "keys_two_under_one_kid.json",
        json.dumps(
            {"keys": [_jwk_as(world.key, "other"), _jwk_as(SigningKey.generate(), "other")]}
        ),
    )
    path = world.write("two_under_one_kid.json", json.dumps(world.record))
    result = run(path, "--roots", world.folder, "--keys", keys)
    assert result.returncode == 2
    assert "kid 'other' names two different keys" in result.stderr


def test_a_folder_keys_json_may_name_a_key_otherwise(world: World, tmp_path: Path) -> None:
    """A folder's keys.json is trusted the same way: here it lists the log's key under its
    thumbprint and under a second kid; the genuine record verifies, with the notice."""
    folder = tmp_path / "folder"
    shutil.copytree(world.folder, folder)
    listed = json.loads((folder / "keys.json").read_text())["keys"]
    (folder / "keys.json").write_text(
        json.dumps({"keys": [*listed, _jwk_as(world.key, "resolver-2026")]})
    )
    path = world.write("folder_declared_kid.json", json.dumps(world.record))
    result = run(path, "--roots", folder, "--at", str(world.record_at))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kid 'resolver-2026' is not its RFC 7638 thumbprint" in result.stderr
    assert str(folder / "keys.json") in result.stderr


def test_library_verifies_with_a_declared_kid(world: World) -> None:
    record, head = _resigned_as(world, "lib-kid")
    keys = KeySet.from_jwks({"keys": [_jwk_as(world.key, "lib-kid")]})
    result = verify(record.read_bytes(), keys=keys, head=str(head), at=world.record_at)
    assert result.ok, result.checks


# --- every file is bounded as it is read ---------------------------------------------------

TWO_GIB = 2 << 30
MEMORY_CAP = 1 << 30  # RLIMIT_AS of the verify-proof process: half of what one input holds


def run_capped(
    args: list[str | Path], stdin: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """verify-proof with its address space capped at MEMORY_CAP (set, then exec'd: the limit
    is the console script's own), so an input read whole before its limit is a crash."""
    cap = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP})); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    with open(stdin or os.devnull, "rb") as source:
        return subprocess.run(
            [sys.executable, "-c", cap, str(VERIFY_PROOF), *map(str, args)],
            capture_output=True,
            text=True,
            stdin=source,
            check=False,
            timeout=120,
        )


def huge_input(tmp_path: Path, kind: str, name: str) -> Path:
    """A 2 GiB sparse file (`truncate`), or a symlink to /dev/zero (endless)."""
    path = tmp_path / name
    if kind == "sparse":
        with path.open("wb") as f:
            f.truncate(TWO_GIB)
    else:
        path.symlink_to("/dev/zero")
    return path


def folder_with(world: World, tmp_path: Path, name: str, kind: str) -> tuple[Path, Path]:
    folder = tmp_path / "roots"
    shutil.copytree(world.folder, folder)
    (folder / name).unlink(missing_ok=True)
    return folder, huge_input(folder, kind, name)


INPUTS: dict[str, Callable[[World, Path, str], tuple[list[str | Path], Path, Path | None]]] = {
    # name -> (arguments, the file named in the error, stdin)
    "RECORD": lambda w, t, k: (
        [(h := huge_input(t, k, "record.json")), "--roots", w.folder],
        h,
        None,
    ),
    "RECORD -": lambda w, t, k: (["-", "--roots", w.folder], Path("stdin"), huge_input(t, k, "in")),
    "--head": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--keys",
            w.keys,
            "--head",
            (h := huge_input(t, k, "head.json")),
        ],
        h,
        None,
    ),
    "--keys": lambda w, t, k: (
        [w.write("r.json", json.dumps(w.record)), "--keys", (h := huge_input(t, k, "keys.json"))],
        h,
        None,
    ),
    "--tsa-ca": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            w.folder,
            "--tsa-ca",
            (h := huge_input(t, k, "ca.pem")),
        ],
        h,
        None,
    ),
    "--policy": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            w.folder,
            "--policy",
            (h := huge_input(t, k, "p.txt")),
        ],
        h,
        None,
    ),
    "--history-proof": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--keys",
            w.keys,
            "--head",
            w.folder / f"{DAY1}.json",
            "--history-proof",
            (h := huge_input(t, k, "p.tlog-proof")),
        ],
        h,
        None,
    ),
    "--roots head": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            (f := folder_with(w, t, f"{DAY1}.json", k))[0],
        ],
        f[1],
        None,
    ),
    "--roots keys.json": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            (f := folder_with(w, t, "keys.json", k))[0],
        ],
        f[1],
        None,
    ),
    "--roots key-records.json": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            (f := folder_with(w, t, "key-records.json", k))[0],
        ],
        f[1],
        None,
    ),
    "--roots tlog-proof": lambda w, t, k: (
        [
            w.write("r.json", json.dumps(w.record)),
            "--roots",
            (f := folder_with(w, t, f"{DAY1}.tlog-proof", k))[0],
        ],
        f[1],
        None,
    ),
}


@pytest.mark.parametrize("kind", ["sparse", "dev-zero"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_attack_a_huge_input_is_refused_as_it_is_read(
    world: World, tmp_path: Path, name: str, kind: str
) -> None:
    # The red team's finding: a 2 GiB --history-proof took 2.1 GB of memory and /dev/zero
    # as the record 12.5 GB. Every file is now read to at most its limit + 1 bytes: under a
    # 1 GiB address space the run ends with exit 2, naming the file and the limit.
    args, named, stdin = INPUTS[name](world, tmp_path, kind)
    result = run_capped([*args, "--at", str(world.record_at)], stdin)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{named}" in result.stderr
    assert re.search(r"larger than [0-9]+ bytes, the limit for this input", result.stderr)
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr


def test_attack_a_huge_stamp_listing_is_refused_as_it_is_read(
    world: World, tmp_path: Path, pki_ec: Pki
) -> None:
    # The stamps are read only when there is a CA to check them against (--tsa-ca).
    folder, named = folder_with(world, tmp_path, f"{DAY1}.timestamps.json", "dev-zero")
    record = world.write("r.json", json.dumps(world.record))
    args = [record, "--roots", folder, "--tsa-ca", pki_ec.ca_cert, "--at", str(world.record_at)]
    result = run_capped(args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{named}: larger than 1048576 bytes, the limit for this input" in result.stderr

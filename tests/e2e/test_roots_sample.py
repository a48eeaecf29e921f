"""The published sample history in roots/: reproducible, audited, and every part checked.

roots/ is made by tools/make_sample.py with the project's own library and a fixed TEST-ONLY
key. These tests check that it is exactly what the tool makes, that the operator's `audit`
accepts it, and then verify it piece by piece the way an outside auditor would: each head
against keys.json, the `prev` chain across the days, and each resolver-2 record (token, leaf,
inclusion proof, anchored head). One head is also checked with joserfc, an independent JOSE
implementation.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import rfc8785
from joserfc import jws as jose
from joserfc.jwk import OKPKey

from capability_anchor import head as heads
from capability_anchor.encoding import b64url_decode
from capability_anchor.jws import HEAD_TYP, verify_record_token
from capability_anchor.keys import KeySet
from capability_anchor.leaf import leaf_hash
from capability_anchor.merkle import verify_inclusion
from tests.kit import paths

ROOT = paths.ROOT
ROOTS = ROOT / "roots"
RECORDS = ROOTS / "records"
ISS = "https://resolver.example"
SEALED_DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")
UNSEALED_DAY = "2026-11-04"
CLI = Path(sys.executable).parent / "capability-anchor"


@pytest.fixture(scope="module")
def keys() -> KeySet:
    return KeySet.from_json((ROOTS / "keys.json").read_bytes())


def read_head(path: Path, keys: KeySet) -> heads.Head:
    """A head document, checked: its JWS verifies and its other members equal the claims."""
    document = heads.parse_document(path.read_bytes())
    verified = heads.verify_head(document.jws, keys)
    assert verified.claims == document.claims
    assert path.read_bytes() == heads.document(verified.claims, verified.jws)
    return verified


def head_file(anchor_url: str) -> Path:
    """The file in roots/ that holds the head an anchor URL names (SPEC §5, §8)."""
    parts = urlsplit(anchor_url).path.split("/")
    assert parts[:2] == ["", "roots"], anchor_url
    if len(parts) == 3:
        return ROOTS / f"{parts[2]}.json"
    assert len(parts) == 4, anchor_url
    return ROOTS / parts[2] / f"{parts[3]}.json"


def test_sample_is_what_make_sample_makes() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_sample.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_audit_accepts_the_folder(tmp_path: Path) -> None:
    run = subprocess.run(
        [str(CLI), "audit", "--data", str(tmp_path / "no-log"), "--roots", str(ROOTS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is True
    assert report["checked"]["roots_days"] == len(SEALED_DAYS)


def test_audit_roots_alone_from_a_folder_with_a_data_log_audits_only_the_sample(
    tmp_path: Path,
) -> None:
    """Issue #35: `audit --roots roots` without --data audited ./data too, so a new user
    next to their own log saw the shipped sample fail with that log's problems. Alone it
    audits the folder; with --data, both (the other log's heads are not the sample's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPABILITY_ANCHOR_")}
    made = subprocess.run(
        [str(CLI), "init", "--iss", "https://other.example"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0 and (tmp_path / "data").is_dir(), made.stderr
    alone = subprocess.run(
        [str(CLI), "audit", "--roots", str(ROOTS)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stdout + alone.stderr
    report = json.loads(alone.stdout)
    assert report["ok"] is True and report["checked"]["roots_days"] == len(SEALED_DAYS)
    assert not any(not k.startswith("roots_") for k, v in report["checked"].items() if v)
    both = subprocess.run(
        [str(CLI), "audit", "--data", "data", "--roots", str(ROOTS)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert both.returncode == 1, both.stdout + both.stderr


def test_keys_json_is_public_only() -> None:
    published = json.loads((ROOTS / "keys.json").read_bytes())
    assert [sorted(k) for k in published["keys"]] == [["alg", "crv", "kid", "kty", "use", "x"]]
    # The private test key is derived by make_sample.py, never stored in the folder.
    assert not [p for p in ROOTS.rglob("*.jwk")]


def test_sealed_heads_chain_by_prev(keys: KeySet) -> None:
    prev: heads.Head | None = None
    for day in SEALED_DAYS:
        head = read_head(ROOTS / f"{day}.json", keys)
        assert (ROOTS / f"{day}.jws").read_bytes() == head.jws.encode("ascii")
        assert head.claims["iss"] == ISS
        assert head.day == day and head.sealed
        expected_prev = None if prev is None else heads.claims_digest(prev.claims)
        assert head.claims["prev"] == expected_prev
        stamps = json.loads((ROOTS / f"{day}.timestamps.json").read_bytes())
        assert stamps["v"] == "0.2" and stamps["day"] == day
        assert [set(t) for t in stamps["timestamps"]] == [{"tsa", "token", "gen_time"}]
        prev = head
    assert read_head(ROOTS / "2026-11-02.json", keys).tree_size == 0  # the empty day


def test_index_lists_the_sealed_days(keys: KeySet) -> None:
    index = json.loads((ROOTS / "index.json").read_bytes())
    assert index["iss"] == ISS
    listed = {d["day"]: d for d in index["days"]}
    assert sorted(listed) == list(SEALED_DAYS)
    for day, entry in listed.items():
        head = read_head(ROOTS / f"{day}.json", keys)
        assert (entry["tree_size"], entry["root"]) == (head.tree_size, head.root.hex())
        assert entry["url"] == f"{ISS}/roots/{day}"


def test_unsealed_heads(keys: KeySet) -> None:
    saved = sorted(ROOTS.glob("????-??-??/*.json"))
    assert saved, "no unsealed heads were exported"
    for path in saved:
        head = read_head(path, keys)
        assert not head.sealed
        assert (head.day, head.tree_size) == (path.parent.name, int(path.stem))
    assert not (ROOTS / f"{UNSEALED_DAY}.json").exists()  # that day is not sealed


def check_record(path: Path, keys: KeySet) -> dict[str, Any]:
    record = json.loads(path.read_bytes())
    iat = record["iat"]
    # Record tokens live 48 h at most, so the sample is verified at its issue time.
    claims = verify_record_token(record["jws"], keys, iss=ISS, at=iat)
    # The file's members are the signed claims plus `jws` and `expires`.
    assert {k: v for k, v in record.items() if k not in ("jws", "expires")} == claims
    anchor, proof = claims["anchor"], claims["proof"]
    assert proof["type"] == "rfc9162-sha256"
    verify_inclusion(
        leaf_hash(claims),
        proof["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(h) for h in proof["path"]],
        bytes.fromhex(anchor["root"]),
    )
    head = read_head(head_file(anchor["url"]), keys)
    assert head.claims["iss"] == claims["iss"]
    assert head.day == anchor["day"]
    assert head.tree_size == proof["tree_size"]
    assert head.root.hex() == anchor["root"]
    assert head.sealed == (anchor["url"] == f"{ISS}/roots/{anchor['day']}")
    return claims


def test_every_record_verifies(keys: KeySet) -> None:
    files = sorted(RECORDS.glob("*.json"))
    assert len(files) >= 3
    anchored = [check_record(path, keys)["anchor"] for path in files]
    urls = [a["url"] for a in anchored]
    assert any(u == f"{ISS}/roots/{d}" for u in urls for d in SEALED_DAYS)
    assert any(u.startswith(f"{ISS}/roots/{UNSEALED_DAY}/") for u in urls)


def test_a_head_verifies_with_joserfc() -> None:
    token = (ROOTS / "2026-11-03.jws").read_text(encoding="ascii")
    (jwk,) = json.loads((ROOTS / "keys.json").read_bytes())["keys"]
    key = OKPKey.import_key(jwk)
    assert key.thumbprint() == jwk["kid"]  # RFC 7638, computed by joserfc
    with warnings.catch_warnings():
        # joserfc warns that the EdDSA name is deprecated (RFC 9864); SPEC §4 mandates it.
        warnings.simplefilter("ignore")
        verified = jose.deserialize_compact(token, key, algorithms=["EdDSA"])
    header = dict(verified.protected)
    assert header == {"alg": "EdDSA", "kid": jwk["kid"], "typ": HEAD_TYP}
    assert b64url_decode(token.split(".")[0]) == rfc8785.dumps(header)
    claims = json.loads(verified.payload)
    assert claims["day"] == "2026-11-03" and claims["sealed"] is True
    assert verified.payload == rfc8785.dumps(claims)


def test_readme_python_examples_run() -> None:
    """The README's Python examples (a head with joserfc, a leaf and its proof) work."""
    readme = (ROOTS / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(blocks) == 3
    for block in blocks:
        run = subprocess.run(
            # joserfc warns that the EdDSA name is deprecated; SPEC §4 mandates it.
            [sys.executable, "-W", "ignore", "-c", block],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, block + run.stderr


@pytest.mark.parametrize("record", sorted((ROOTS / "records").glob("*.json")), ids=lambda p: p.stem)
def test_verify_proof_passes_every_sample_record(record: Path) -> None:
    """The auditor's one command, as roots/README.md gives it."""
    iat = json.loads(record.read_bytes())["iat"]
    cli = Path(sys.executable).parent / "verify-proof"
    base = [str(cli), str(record), "--roots", str(ROOTS), "--at", str(iat), "--json"]
    result = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    results = {c["name"]: c["result"] for c in report["checks"]}
    assert results.pop("timestamp") == "SKIP"  # no --tsa-ca: stamps are not trusted
    assert results.pop("witnesses") == "SKIP"  # no --policy
    # check 8 passes once the sample ships tlog-proofs (SPEC §12.4), and SKIPs before
    has_proof = any(ROOTS.glob("**/*.tlog-proof"))
    assert results.pop("history") == ("PASS" if has_proof else "SKIP")
    assert set(results.values()) == {"PASS"}
    tsa_ca = ["--tsa-ca", str(ROOTS / "tsa-ca.pem")]
    result = subprocess.run(base + tsa_ca, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    results = {c["name"]: c["result"] for c in json.loads(result.stdout)["checks"]}
    # Sealed days are stamped; an unsealed head never is.
    sealed = "/roots/2026-11-04/" not in json.loads(record.read_bytes())["anchor"]["url"]
    assert results["timestamp"] == ("PASS" if sealed else "SKIP")


@pytest.mark.parametrize("day", SEALED_DAYS)
def test_openssl_verifies_every_sample_stamp(day: str) -> None:
    """The README's one-line check with OpenSSL alone, for the .tsr and every listed stamp."""
    listed = json.loads((ROOTS / f"{day}.timestamps.json").read_bytes())["timestamps"]
    assert listed and (ROOTS / f"{day}.tsr").read_bytes() == base64.b64decode(listed[0]["token"])
    run = subprocess.run(
        [
            "openssl",
            "ts",
            "-verify",
            "-data",
            f"{day}.jws",
            "-in",
            f"{day}.tsr",
            "-CAfile",
            "tsa-ca.pem",
        ],
        cwd=ROOTS,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0 and "Verification: OK" in run.stdout, run.stdout + run.stderr


def test_audit_chains_every_sample_stamp(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            str(CLI),
            "audit",
            "--data",
            str(tmp_path / "no-log"),
            "--roots",
            str(ROOTS),
            "--tsa-ca",
            str(ROOTS / "tsa-ca.pem"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["checked"]["roots_stamps_chained"] == len(SEALED_DAYS)


def test_audit_verifies_the_records_beside_the_heads(tmp_path: Path) -> None:
    """audit reuses verify-proof's library on `records/*.json`: a forged record is named."""
    import shutil

    folder = tmp_path / "roots"
    shutil.copytree(ROOTS, folder)
    record = sorted((folder / "records").glob("*.json"))[0]
    doc = json.loads(record.read_bytes())
    doc["proof"]["path"] = list(reversed(doc["proof"]["path"]))
    doc.pop("jws")  # an unsigned copy: only the anchor and proof are checked
    record.write_text(json.dumps(doc))
    cli = Path(sys.executable).parent / "capability-anchor"
    result = subprocess.run(
        [str(cli), "audit", "--data", str(tmp_path / "none"), "--roots", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{record}: inclusion" in result.stderr or f"{record}: leaf" in result.stderr

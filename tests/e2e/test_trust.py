"""Trust comes only from the key file: key rotation records, the signed settings statement,
`rotate-key`, and what export, `/keys`, audit and verify-proof make of a database an attacker
wrote to (without the key file). Real SQLite files, real CLI processes, the real app."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from capability_anchor import head as heads
from capability_anchor import jws
from capability_anchor.api import Settings, create_app
from capability_anchor.encoding import b64url_decode
from capability_anchor.errors import (
    ClaimsError,
    IssuerMismatch,
    JWSTypeError,
    StartupCheckFailed,
    UnknownKeyError,
)
from capability_anchor.keys import KeySet, SigningKey, load_key_file, trust
from capability_anchor.log import Log
from capability_anchor.merkle import hash_leaf, inclusion_path, root_hash
from tests.kit import paths
from tests.kit.logkit import DAY3, DAY4, DAY5, ISS, History, at, build_history, raw, record, run_cli
from tests.kit.serverkit import serving

VERIFY_PROOF = Path(sys.executable).parent / "verify-proof"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("trust"))


@pytest.fixture
def history(base: History, tmp_path: Path) -> History:
    return base.copy(tmp_path / "data")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def rotate(data: Path) -> subprocess.CompletedProcess[str]:
    """Both phases of `rotate-key`, the notice overridden: the activation's process."""
    published = cli("rotate-key", "--data", data)
    assert published.returncode == 0, published.stderr
    return cli("rotate-key", "--data", data, "--activate", "--force")


def audit(data: Path, *more: str | Path) -> subprocess.CompletedProcess[str]:
    return cli("audit", "--data", data, *more)


def verify_proof(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VERIFY_PROOF), *map(str, args)], capture_output=True, text=True, check=False
    )


def checks(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """verify-proof --json: check name -> PASS/FAIL/SKIP."""
    return {c["name"]: c["result"] for c in json.loads(result.stdout)["checks"]}


def served_keys(data: Path) -> KeySet:
    """GET /keys from the real app on this data dir."""
    app = create_app(Settings(data_dir=data, background=False, rate_limit=0))
    with TestClient(app) as client:
        response = client.get("/keys")
        assert response.status_code == 200
        return KeySet.from_json(response.content)


def jwk_json(key: SigningKey) -> str:
    return json.dumps(key.public.jwk(), sort_keys=True)


def inject_key(data: Path, key: SigningKey) -> None:
    """What the attacker with write access to log.sqlite3 (not to the key file) does."""
    with raw(data) as conn:
        conn.execute(
            "INSERT INTO keys (kid, jwk, added) VALUES (?, ?, 0)", (key.kid, jwk_json(key))
        )


def sql(data: Path, statement: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with raw(data) as conn:
        return list(conn.execute(statement, params))


# --- 1. a key injected by a plain INSERT ---------------------------------------------------------


def forge_today(history: History, evil: SigningKey) -> dict[str, Any]:
    """Four entries of DAY5 and a genuine checkpoint at size 4; then a head of size 3 and a
    record token anchored to it, both signed by `evil`, the head inserted by raw SQL as the
    attacker would (the log's newest head stays its own). Returns the forged record, shaped
    as /record serves one."""
    history.clock.set(DAY5, 3600)
    with history.open() as log:
        log.append([record(DAY5, n) for n in range(4)])
        assert log.checkpoint() is not None
        entries = log.store.entries(DAY5, 0, 3)
        day4 = log.store.sealed_head(DAY4)
        assert day4 is not None
        prev = heads.claims_digest(heads.parse_document(day4.doc).claims)
    leaves = [e.leaf_hash for e in entries]
    root = root_hash(leaves)
    iat = int(at(DAY5, 3700))
    claims = heads.make_claims(
        iss=ISS, day=DAY5, tree_size=3, root=root, sealed=False, prev=prev, iat=iat
    )
    forged = heads.sign(claims, evil)
    with raw(history.data) as conn:
        conn.execute(
            "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc) "
            "VALUES (?, 3, 0, ?, ?, ?, ?)",
            (DAY5, root, iat, evil.kid, forged.document()),
        )
    signed = {
        **json.loads(entries[0].claims),
        "iat": iat,
        "exp": iat + 3600,
        "anchor": {"day": DAY5, "root": root.hex(), "url": f"{ISS}/roots/{DAY5}/3"},
        "proof": {
            "type": "rfc9162-sha256",
            "leaf_index": 0,
            "tree_size": 3,
            "path": [p.hex() for p in inclusion_path(leaves, 0, 3)],
        },
    }
    assert hash_leaf(entries[0].claims) == leaves[0]
    return {**signed, "jws": jws.sign_claims(signed, evil, jws.RECORD_TYP)}


def test_key_injected_by_plain_insert_is_not_trusted_served_exported_or_accepted(
    history: History, tmp_path: Path
) -> None:
    evil = SigningKey.generate()
    inject_key(history.data, evil)
    forged = forge_today(history, evil)
    (tmp_path / "record.json").write_text(json.dumps(forged))
    with history.open() as log:
        trusted = log.keyset()
        own = log.key.kid
    assert trusted.kids == (own,)
    assert evil.kid not in served_keys(history.data)

    out = tmp_path / "roots"
    exported = cli("export", "--data", history.data, out)
    assert exported.returncode == 0, exported.stderr
    assert KeySet.from_json((out / "keys.json").read_bytes()).kids == (own,)
    assert (out / DAY5 / "3.json").exists()  # the forged head is published: it is in the log

    result = audit(history.data)
    assert result.returncode == 1, result.stdout
    assert f"keys table: key {evil.kid} has no endorsement chain" in result.stderr
    assert f"head {DAY5} size 3 unsealed" in result.stderr and evil.kid in result.stderr
    assert audit(history.data, "--roots", out).returncode == 1

    # The record token and, on its own, the unsigned record's head: both are refused.
    unsigned = {k: v for k, v in forged.items() if k not in ("jws", "iat", "exp")}
    (tmp_path / "unsigned.json").write_text(json.dumps(unsigned))
    at_ = str(forged["iat"])
    refused = verify_proof(tmp_path / "record.json", "--roots", out, "--at", at_, "--json")
    assert refused.returncode == 1
    assert checks(refused)["record_signature"] == "FAIL"
    refused = verify_proof(tmp_path / "unsigned.json", "--roots", out, "--json")
    assert refused.returncode == 1
    assert checks(refused)["head_signature"] == "FAIL"
    assert f"kid '{evil.kid}' is not in the trusted key set" in refused.stdout
    # The control: the same records and folder, with the injected key trusted by hand, pass.
    (tmp_path / "with-evil.json").write_bytes(KeySet([*trusted, evil.public]).to_json())
    keys = tmp_path / "with-evil.json"
    for name in ("record.json", "unsigned.json"):
        control = verify_proof(tmp_path / name, "--roots", out, "--keys", keys, "--at", at_)
        assert control.returncode == 0, control.stdout


# --- 2. forged rotation records ------------------------------------------------------------------


def _insert_record(data: Path, signer: str, kid: str, token: str) -> None:
    with raw(data) as conn:
        conn.execute(
            "INSERT INTO key_records (signer, kid, jws, added) VALUES (?, ?, ?, 0)",
            (signer, kid, token),
        )


def record_signed_by_an_injected_key(data: Path, own: SigningKey) -> tuple[str, str]:
    """The injected key endorses a second one: a chain that starts at no trusted key."""
    evil, evil2 = SigningKey.generate(), SigningKey.generate()
    inject_key(data, evil)
    inject_key(data, evil2)
    _insert_record(
        data, evil.kid, evil2.kid, trust.make_key_record(evil, evil2.public, iss=ISS, iat=1)
    )
    return evil2.kid, "signed by a key no trusted key endorses"


def record_naming_the_log_key_with_a_forged_signature(
    data: Path, own: SigningKey
) -> tuple[str, str]:
    """The header names the log's kid, the signature is the attacker's."""
    evil = SigningKey.generate()
    inject_key(data, evil)
    token = trust.make_key_record(evil, evil.public, iss=ISS, iat=1)
    genuine_shape = trust.make_key_record(own, evil.public, iss=ISS, iat=1)
    header = genuine_shape.split(".")[0]
    _, payload, signature = token.split(".")
    _insert_record(data, own.kid, evil.kid, f"{header}.{payload}.{signature}")
    return evil.kid, "does not verify"


def record_signed_by_the_log_key_for_another_log(data: Path, own: SigningKey) -> tuple[str, str]:
    """A genuine record of another log (same key, other iss) replayed into this one."""
    evil = SigningKey.generate()
    inject_key(data, evil)
    token = trust.make_key_record(own, evil.public, iss="https://other.example", iat=1)
    _insert_record(data, own.kid, evil.kid, token)
    return evil.kid, "iss is 'https://other.example'"


@pytest.mark.parametrize(
    "forge",
    [
        record_signed_by_an_injected_key,
        record_naming_the_log_key_with_a_forged_signature,
        record_signed_by_the_log_key_for_another_log,
    ],
)
def test_forged_rotation_record_is_flagged_and_trusts_nothing(history: History, forge: Any) -> None:
    own = load_key_file(history.data / "signing-key.jwk")
    kid, reason = forge(history.data, own)
    with history.open() as log:
        assert log.keyset().kids == (own.kid,)
    result = audit(history.data)
    assert result.returncode == 1
    assert "key record #1: " in result.stderr and reason in result.stderr, result.stderr
    assert f"keys table: key {kid} has no endorsement chain" in result.stderr


# --- 3. rotation ---------------------------------------------------------------------------------


def test_rotation_happy_path(history: History, tmp_path: Path) -> None:
    data = history.data
    old = load_key_file(data / "signing-key.jwk")
    before_out = tmp_path / "before"
    assert cli("export", "--data", data, before_out).returncode == 0

    rotated = rotate(data)
    assert rotated.returncode == 0, rotated.stderr
    report = json.loads(rotated.stdout)
    new = load_key_file(data / "signing-key.jwk")
    assert report["old_kid"] == old.kid and report["kid"] == new.kid != old.kid
    backup = Path(report["backup"])
    assert backup == data / f"signing-key.{old.kid}.jwk"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert load_key_file(backup).kid == old.kid
    assert not (data / "signing-key.jwk.new").exists()

    # The start-up self-check passes (the newest head is the old key's), and new heads are
    # signed by the new key.
    history.clock.set(DAY5, 3600)
    server = {**record(DAY5, 0), "checked_at": f"{DAY5}T01:00:00Z", "evidence": {}}
    with history.open() as log:
        assert set(log.keyset().kids) == {old.kid, new.kid}
        log.append([server])
        assert log.checkpoint() is not None
        assert log.store.newest_published().kid == new.kid  # type: ignore[union-attr]
        # Old heads still verify with the trusted set.
        sealed = log.store.sealed_head(DAY3)
        assert sealed is not None and sealed.kid == old.kid
        heads.verify_head(heads.parse_document(sealed.doc).jws, log.keyset())
        entry = log.store.entry(DAY3, 0)
        assert entry is not None
        old_record = {**json.loads(entry.claims), **log.proof(DAY3, 0)}
        new_record = log.record(sub=server["sub"])
    (tmp_path / "old-head.json").write_text(json.dumps(old_record))
    (tmp_path / "new-record.json").write_text(json.dumps(new_record))
    assert jws.verify(new_record["jws"], KeySet.of(new.public), jws.RECORD_TYP).kid == new.kid

    assert set(served_keys(data).kids) == {old.kid, new.kid}
    result = audit(data)
    assert result.returncode == 0, result.stderr

    # The folder exported before the rotation gains the new key; key-records.json appears.
    out = before_out
    exported = cli("export", "--data", data, out)
    assert exported.returncode == 0, exported.stderr
    assert set(KeySet.from_json((out / "keys.json").read_bytes()).kids) == {old.kid, new.kid}
    _, tokens = trust.read_key_records((out / "key-records.json").read_bytes())
    assert len(tokens) == 2
    assert audit(data, "--roots", out).returncode == 0

    # verify-proof: an entry under a sealed head of the old key, a record token of the new
    # key under a head of the new key, from the folder's keys.json.
    when = str(new_record["iat"])
    for name in ("old-head.json", "new-record.json"):
        ok = verify_proof(tmp_path / name, "--roots", out, "--at", when)
        assert ok.returncode == 0, ok.stdout
    # An auditor who holds only the old key follows old -> new through key-records.json.
    (tmp_path / "old.json").write_bytes(KeySet.of(old.public).to_json())
    only_old = tmp_path / "old.json"
    for name in ("old-head.json", "new-record.json"):
        ok = verify_proof(tmp_path / name, "--roots", out, "--keys", only_old, "--at", when)
        assert ok.returncode == 0, ok.stdout
    assert audit(data, "--roots", out, "--keys", only_old).returncode == 0
    folder_only = cli("audit", "--data", tmp_path / "none", "--roots", out, "--keys", only_old)
    assert folder_only.returncode == 0, folder_only.stderr
    # ... and without key-records.json the new key's record is refused.
    (out / "key-records.json").unlink()
    refused = verify_proof(
        tmp_path / "new-record.json", "--roots", out, "--keys", only_old, "--at", when
    )
    assert refused.returncode == 1


def test_a_real_server_after_injection_and_rotation_serves_only_trusted_keys(
    tmp_path: Path,
) -> None:
    """`serve` as a process: /keys is the old and the new key, never the injected one, and
    /record tokens are the new key's."""
    data = tmp_path / "live"
    assert cli("init", "--data", data, "--iss", ISS).returncode == 0
    server = {**record("live", 0), "checked_at": "2026-01-01T00:00:00Z", "evidence": {}}
    (tmp_path / "in.jsonl").write_text(json.dumps(server) + "\n")
    assert cli("append", "--data", data, tmp_path / "in.jsonl").returncode == 0
    assert cli("checkpoint", "--data", data).returncode == 0
    old = load_key_file(data / "signing-key.jwk")
    evil = SigningKey.generate()
    inject_key(data, evil)
    assert rotate(data).returncode == 0
    new = load_key_file(data / "signing-key.jwk")
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        keys = KeySet.from_json(client.get("/keys").content)
        answer = client.get("/record", params={"id": server["sub"]})
    assert set(keys.kids) == {old.kid, new.kid}
    assert answer.status_code == 200, answer.text
    assert jws.verify(answer.json()["jws"], keys, jws.RECORD_TYP).kid == new.kid


def test_an_interrupted_rotation_refuses_to_open_and_resumes(history: History) -> None:
    """The state between the database commit and the key file swap: the database trusts the
    new key and its settings are the new key's, the key file is still the old one."""
    data = history.data
    assert rotate(data).returncode == 0
    new = load_key_file(data / "signing-key.jwk")
    old_file = next(data.glob("signing-key.*.jwk"))
    (data / "signing-key.jwk").rename(data / "signing-key.jwk.new")
    shutil.copy2(old_file, data / "signing-key.jwk")
    with pytest.raises(StartupCheckFailed, match="a key rotation was interrupted"):
        Log.open(data)
    resumed = cli("rotate-key", "--data", data, "--activate")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["kid"] == new.kid
    assert load_key_file(data / "signing-key.jwk").kid == new.kid
    with history.open() as log:
        assert len(log.store.key_records()) == 2  # nothing stored twice
    assert audit(data).returncode == 0


def test_a_second_rotation_chains(history: History) -> None:
    data = history.data
    kids = [load_key_file(data / "signing-key.jwk").kid]
    for _ in range(2):
        assert rotate(data).returncode == 0
        kids.append(load_key_file(data / "signing-key.jwk").kid)
    with history.open() as log:
        assert set(log.keyset().kids) == set(kids)
    assert audit(data).returncode == 0


# --- 4. signed settings --------------------------------------------------------------------------


def test_public_url_changed_by_raw_sql_is_refused_and_flagged(history: History) -> None:
    with raw(history.data) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('public_url', 'https://evil.example')"
        )
    with pytest.raises(StartupCheckFailed, match=r"meta\.public_url is 'https://evil.example'"):
        Log.open(history.data)
    result = audit(history.data)
    assert result.returncode == 1
    assert "meta.public_url is 'https://evil.example', the signed settings say None" in (
        result.stderr
    )
    refused = cli("checkpoint", "--data", history.data)
    assert refused.returncode == 1 and "meta.public_url" in refused.stderr


@pytest.fixture
def two_ca_log(tmp_path: Path, pki_rsa: Any, pki_ec: Any) -> Path:
    data = tmp_path / "tsa-data"
    created = cli(
        *("init", "--data", data, "--iss", ISS, "--tsa", "http://127.0.0.1:9/"),
        *("--tsa-ca", pki_rsa.ca_cert, "--tsa-ca", pki_ec.ca_cert),
    )
    assert created.returncode == 0, created.stderr
    return data


def test_stored_tsa_ca_removed_by_raw_sql_is_refused_and_flagged(two_ca_log: Path) -> None:
    (config,) = sql(two_ca_log, "SELECT value FROM meta WHERE key = 'config'")[0]
    stored = json.loads(config)
    assert stored["tsa_ca"].count("BEGIN CERTIFICATE") == 2
    first = stored["tsa_ca"].split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    with raw(two_ca_log) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('config', ?)",
            (json.dumps({**stored, "tsa_ca": first}, sort_keys=True),),
        )
    with pytest.raises(StartupCheckFailed, match=r"meta\.config\.tsa_ca differs"):
        Log.open(two_ca_log)
    result = audit(two_ca_log)
    assert result.returncode == 1
    assert "meta.config.tsa_ca differs from the signed settings (2 certificates signed, " in (
        result.stderr
    )
    assert "1 certificate stored)" in result.stderr


def test_a_tsa_url_changed_by_raw_sql_is_refused(two_ca_log: Path) -> None:
    (config,) = sql(two_ca_log, "SELECT value FROM meta WHERE key = 'config'")[0]
    stored = {**json.loads(config), "tsa": ["https://evil.example/tsa"]}
    with raw(two_ca_log) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('config', ?)", (json.dumps(stored),)
        )
    with pytest.raises(StartupCheckFailed, match=r"meta\.config\.tsa differs"):
        Log.open(two_ca_log)


def test_a_settings_statement_inserted_by_raw_sql_is_refused(history: History) -> None:
    """The attacker changes public_url and adds a statement of it signed by their key."""
    evil = SigningKey.generate()
    with raw(history.data) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('public_url', 'https://evil.example')"
        )
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        token = trust.sign_settings(meta, evil, reason="rotate-key", iat=1)
        conn.execute("INSERT INTO settings (kid, jws, added) VALUES (?, ?, 1)", (evil.kid, token))
    with pytest.raises(StartupCheckFailed, match="is not signed by the key file's key"):
        Log.open(history.data)


def test_a_log_made_before_signed_settings_gets_them_at_its_first_open(history: History) -> None:
    """A schema 1 database (no rotation records, no settings): the first open by the key-file
    holder signs the settings as they are, once; afterwards it is an ordinary log."""
    with raw(history.data) as conn:
        conn.execute("DROP TABLE key_records")
        conn.execute("DROP TABLE settings")
        conn.execute("DROP TABLE history")  # schema 3's tables (their triggers go with them)
        conn.execute("DROP TABLE history_tiles")
        for name in ("checkpoints", "cosignatures", "policies", "witness_state"):  # schema 4's
            conn.execute(f"DROP TABLE {name}")
        conn.execute("DROP INDEX heads_by_kind")  # schema 4's index on a schema 1 table
        conn.execute("PRAGMA user_version = 1")
    with history.open() as log:
        ((_, kid, token),) = log.store.settings_statements()
        claims = trust.verify_settings(token, KeySet.of(log.key.public))
        assert claims["reason"] == "upgrade" and kid == log.key.kid
        assert claims["iss"] == ISS and claims["public_url"] is None
        assert "settings_unsigned" not in log.store.meta()
    with history.open() as log:
        assert len(log.store.settings_statements()) == 1
    assert audit(history.data).returncode == 0


def _empty_settings(data: Path) -> None:
    with raw(data) as conn:
        conn.execute("DROP TABLE settings")
        conn.execute(
            "CREATE TABLE settings (id INTEGER PRIMARY KEY, kid TEXT NOT NULL, "
            "jws TEXT NOT NULL, added INTEGER NOT NULL) STRICT"
        )


def test_a_current_log_whose_statements_are_gone_is_refused(history: History) -> None:
    """Only an upgrade signs unsigned settings: a schema 2 log without them was tampered with."""
    _empty_settings(history.data)
    with pytest.raises(StartupCheckFailed, match="no signed settings statement"):
        Log.open(history.data)
    assert audit(history.data).returncode == 1


def test_an_upgrade_interrupted_after_its_migration_signs_at_the_next_open(
    history: History,
) -> None:
    """The migration committed (with its mark) but the process died before signing."""
    _empty_settings(history.data)
    with raw(history.data) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('settings_unsigned', 'upgrade')")
    with history.open() as log:
        ((_, _, token),) = log.store.settings_statements()
        assert trust.verify_settings(token, KeySet.of(log.key.public))["reason"] == "upgrade"
        assert "settings_unsigned" not in log.store.meta()


def test_the_upgrade_mark_signs_nothing_when_statements_exist(history: History) -> None:
    with raw(history.data) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('settings_unsigned', 'upgrade')")
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('public_url', 'https://evil.example')"
        )
    with pytest.raises(StartupCheckFailed, match=r"meta\.public_url"):
        Log.open(history.data)


# --- append-only ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "match"),
    [
        ("UPDATE key_records SET kid = 'x'", "key_records cannot be updated"),
        ("DELETE FROM key_records", "key_records cannot be deleted"),
        (
            "INSERT OR REPLACE INTO key_records (id, signer, kid, jws, added) "
            "VALUES (1, 'a', 'b', 'c', 0)",
            "a key_records row is stored under this id",
        ),
        ("UPDATE settings SET jws = 'x'", "settings cannot be updated"),
        ("DELETE FROM settings", "settings cannot be deleted"),
        (
            "INSERT OR REPLACE INTO settings (id, kid, jws, added) VALUES (1, 'a', 'b', 0)",
            "a settings row is stored under this id",
        ),
    ],
)
def test_rotation_records_and_settings_are_append_only(
    history: History, statement: str, match: str
) -> None:
    assert rotate(history.data).returncode == 0
    before = sql(history.data, "SELECT * FROM key_records UNION ALL SELECT *, '' FROM settings")
    with raw(history.data) as conn, pytest.raises(sqlite3.IntegrityError, match=match):
        conn.execute(statement)
    after = sql(history.data, "SELECT * FROM key_records UNION ALL SELECT *, '' FROM settings")
    assert after == before


# --- 5. an exported keys.json with an extra key --------------------------------------------------


def test_exported_keys_json_with_an_extra_key_is_flagged_with_the_data_dir(
    history: History, tmp_path: Path
) -> None:
    out = tmp_path / "roots"
    assert cli("export", "--data", history.data, out).returncode == 0
    published = KeySet.from_json((out / "keys.json").read_bytes())
    extra = SigningKey.generate().public
    (out / "keys.json").write_bytes(KeySet([*published, extra]).to_json())
    # The folder alone cannot tell (keys.json is its trust); with the data dir it can.
    assert cli("audit", "--data", tmp_path / "none", "--roots", out).returncode == 0
    result = audit(history.data, "--roots", out)
    assert result.returncode == 1
    assert f"keys.json holds key(s) ['{extra.kid}'] that the log does not trust" in result.stderr


def test_keys_json_naming_the_log_key_by_another_kid_is_flagged_and_not_exported_over(
    history: History, tmp_path: Path
) -> None:
    """A verifier may trust a key under a kid that is not its thumbprint; the log's own
    folder never has one: with the data dir the audit flags it, and export refuses it."""
    out = tmp_path / "roots"
    assert cli("export", "--data", history.data, out).returncode == 0
    listed = json.loads((out / "keys.json").read_text())["keys"]
    alias = {**listed[0], "kid": "resolver-2026"}
    (out / "keys.json").write_text(json.dumps({"keys": [*listed, alias]}))
    result = audit(history.data, "--roots", out)
    assert result.returncode == 1
    assert "keys.json holds key(s) ['resolver-2026'] that the log does not trust" in result.stderr
    again = cli("export", "--data", history.data, out)
    assert again.returncode == 1
    assert "not the RFC 7638 thumbprint" in again.stderr


def test_a_forged_record_in_an_exported_folder_is_flagged(history: History, tmp_path: Path) -> None:
    assert rotate(history.data).returncode == 0
    out = tmp_path / "roots"
    assert cli("export", "--data", history.data, out).returncode == 0
    evil = SigningKey.generate()
    iss, tokens = trust.read_key_records((out / "key-records.json").read_bytes())
    forged = trust.make_key_record(evil, SigningKey.generate().public, iss=iss, iat=1)
    (out / "key-records.json").write_bytes(trust.key_records_document(iss, [*tokens, forged]))
    result = cli("audit", "--data", tmp_path / "none", "--roots", out)
    assert result.returncode == 1
    assert "key-records.json: record 2: signed by a key no trusted key endorses" in result.stderr
    with_data = audit(history.data, "--roots", out)
    assert "key-records.json differs from the log's key rotation records" in with_data.stderr


# --- the record format itself -------------------------------------------------------------------


def _claims_token(signer: SigningKey, claims: dict[str, Any], typ: str = trust.KEY_TYP) -> str:
    return jws.sign_claims(claims, signer, typ)


def test_rotation_record_rules() -> None:
    a, b = SigningKey.generate(), SigningKey.generate()
    trusted = KeySet.of(a.public)
    good = {"v": "0.2", "iss": ISS, "kid": b.kid, "jwk": b.public.jwk(), "iat": 5}
    record = trust.verify_key_record(_claims_token(a, good), trusted, iss=ISS)
    assert (record.signer, record.key, record.iat) == (a.kid, b.public, 5)
    cases: list[tuple[str, type[Exception]]] = [
        (_claims_token(a, good, jws.HEAD_TYP), JWSTypeError),
        (_claims_token(b, good), UnknownKeyError),
        (_claims_token(a, {**good, "iss": "https://other.example"}), IssuerMismatch),
        (_claims_token(a, {**good, "extra": 1}), ClaimsError),
        (_claims_token(a, {**good, "kid": a.kid}), ClaimsError),
        (_claims_token(a, {**good, "jwk": {**b.public.jwk(), "use": "enc"}}), ClaimsError),
        (_claims_token(a, {k: v for k, v in good.items() if k != "iat"}), ClaimsError),
        (_claims_token(a, {**good, "jwk": a.public.jwk(), "kid": a.kid}), ClaimsError),
        (_claims_token(a, {**good, "v": "0.1"}), ClaimsError),
        # A verifier may trust a key under another kid; a rotation record never endorses one.
        (
            _claims_token(a, {**good, "kid": "other", "jwk": {**b.public.jwk(), "kid": "other"}}),
            ClaimsError,
        ),
    ]
    for token, error in cases:
        with pytest.raises(error):
            trust.verify_key_record(token, trusted, iss=ISS)


def test_closure_follows_records_in_any_order_and_never_from_an_untrusted_key() -> None:
    a, b, c, x = (SigningKey.generate() for _ in range(4))
    tokens = [
        trust.make_key_record(b, c.public, iss=ISS, iat=1),  # only once b is trusted
        trust.make_key_record(x, a.public, iss=ISS, iat=1),  # x is never trusted
        trust.make_key_record(a, b.public, iss=ISS, iat=1),
    ]
    chain = trust.closure([a.public], tokens, iss=ISS)
    assert set(chain.keys.kids) == {a.kid, b.kid, c.kid}
    assert sorted(chain.records) == [0, 2] and list(chain.problems) == [1]


def test_the_rotation_record_in_roots_readme_verifies() -> None:
    """roots/README.md's example: the sample's test key endorses the example key."""
    roots = paths.ROOT / "roots"
    text = (roots / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Key rotation records") :]
    token = next(line for line in section.splitlines() if line.startswith("eyJ"))
    sample = KeySet.from_json((roots / "keys.json").read_bytes())
    endorsed = trust.verify_key_record(token, sample, iss=ISS)
    assert endorsed.key.kid == "3ePm8ODQBDGDbYjpTkRppRSJjdBrVyZBENQlgsCfAmo"
    assert endorsed.signer == "xA9jr3JfuuB6hDjSb8DejqCN30YKK8WB-v-q-WMSi34"
    assert endorsed.iat == 1793836800
    header = json.loads(b64url_decode(token.split(".")[0]))
    assert header == {"alg": "EdDSA", "kid": endorsed.signer, "typ": "capability-anchor-key+jws"}

"""Two-phase key rotation (SPEC §13.2, CR 0.2 §11): `rotate-key` publishes the next key and
signs nothing with it, `rotate-key --activate` hands over once the notice has passed, both
survive a crash, and a running `serve` (and the ASGI form under two workers) adopts each
phase without a restart. Real CLI processes, real SQLite files, real servers on loopback."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.errors import Conflict, NotFound, VerificationError
from capability_anchor.keys import KeySet, SigningKey, load_key_file, trust
from capability_anchor.log import Log, rotation
from capability_anchor.note import TYPE_ED25519, Cosigner, format_vkey, parse_policy
from tests.kit.logkit import Clock, raw
from tests.kit.rotationkit import (
    append,
    cli,
    kid_file,
    ok,
    post,
    record_token,
    served_kids,
    signed_kids,
    token_kid,
)
from tests.kit.serverkit import clean_env, free_port, serving, uvicorn_argv

ISS = "https://resolver.example"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    ok("init", "--data", data, "--iss", ISS)
    append(data, "before")
    return data


def test_phase_one_publishes_the_next_key_and_signs_nothing_with_it(
    data: Path, tmp_path: Path
) -> None:
    current = kid_file(data)
    published = ok("rotate-key", "--data", data)
    nxt = load_key_file(data / "signing-key.jwk.new")
    assert stat.S_IMODE((data / "signing-key.jwk.new").stat().st_mode) == 0o600
    assert published["phase"] == "published"
    assert (published["current_kid"], published["kid"]) == (current, nxt.kid)
    assert published["vkey"] == format_vkey(
        "resolver.example/history", TYPE_ED25519, nxt.public.raw
    )
    activate_at = published["activate_at"]
    assert activate_at.endswith("Z") and activate_at > published["published"]
    # Published: /keys (a real server), keys.json and key-records.json list it.
    append(data, "between")  # the log goes on signing, with the current key
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        assert served_kids(client) == {current, nxt.kid}
        token = record_token(client, "between")
        vkey = client.get("/history/vkey").text.strip()
    out = tmp_path / "roots"
    ok("export", "--data", data, out)
    assert set(KeySet.from_json((out / "keys.json").read_bytes()).kids) == {current, nxt.kid}
    _, records = trust.read_key_records((out / trust.KEY_RECORDS_FILE).read_bytes())
    assert len(records) == 1
    # Nothing anywhere is signed by the next key: every head, settings statement, checkpoint
    # note and token is the current key's; /history/vkey still serves the current note key.
    assert token_kid(token) == current
    signed = signed_kids(data)
    assert signed["heads"] and signed["checkpoints"]
    assert {kid for kinds in signed.values() for kid in kinds} == {current}
    assert vkey != published["vkey"]
    assert ok("audit", "--data", data)["ok"] is True


def test_a_rerun_of_phase_one_reports_the_pending_rotation_and_stores_nothing(data: Path) -> None:
    first = ok("rotate-key", "--data", data, "--notice", "600")
    again = ok("rotate-key", "--data", data, "--notice", "5")
    assert again == first
    with raw(data) as conn:
        assert conn.execute("SELECT COUNT(*) FROM key_records").fetchone()[0] == 1


def test_activation_before_the_notice_is_refused_naming_the_time(data: Path) -> None:
    published = ok("rotate-key", "--data", data)
    refused = cli("rotate-key", "--data", data, "--activate")
    assert refused.returncode == 1
    assert published["activate_at"] in refused.stderr and "--force" in refused.stderr
    assert kid_file(data) == published["current_kid"]
    assert set(signed_kids(data)["settings"]) == {published["current_kid"]}
    forced = ok("rotate-key", "--data", data, "--activate", "--force")
    assert forced["phase"] == "activated"
    assert (forced["old_kid"], forced["kid"]) == (published["current_kid"], published["kid"])
    assert kid_file(data) == published["kid"]
    assert not (data / "signing-key.jwk.new").exists()


def test_activation_with_nothing_pending_is_refused(data: Path) -> None:
    refused = cli("rotate-key", "--data", data, "--activate")
    assert refused.returncode == 1
    assert "no rotation is pending" in refused.stderr


def test_force_without_activate_is_a_usage_error(data: Path) -> None:
    assert cli("rotate-key", "--data", data, "--force").returncode == 2
    assert cli("rotate-key", "--data", data, "--notice", "-1").returncode == 2


def test_activation_follows_the_clock_of_the_log(data: Path) -> None:
    """The log's clock seam: refused one second before the notice ends, accepted at it."""
    clock = Clock(time.time())

    def opener(path: Path) -> Log:
        return Log.open(path, clock=clock)

    published = rotation.publish(data, opener, notice=120)
    assert published.activate_at == published.published + 120
    clock.t = published.activate_at - 1
    with pytest.raises(Conflict, match="activation is allowed from"):
        rotation.activate(data, opener)
    clock.t = published.activate_at
    done = rotation.activate(data, opener)
    assert done.kid == published.kid == kid_file(data)


def test_after_activation_everything_new_is_signed_by_the_next_key_and_old_still_verifies(
    data: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.txt"
    with Log.open(data) as log:
        old_vkey = log.read.history.vkey()
    witness = Cosigner("w.example", SigningKey.generate()).verifier.vkey()
    policy.write_text(f"log {old_vkey}\nwitness w1 {witness}\nquorum w1\n")
    ok("policy", "--data", data, policy)
    out = tmp_path / "roots"
    ok("export", "--data", data, out)
    before = signed_kids(data)
    old = kid_file(data)
    published = ok("rotate-key", "--data", data)
    done = ok("rotate-key", "--data", data, "--activate", "--force")
    new = done["kid"]
    append(data, "after")
    after = signed_kids(data)
    # Rows signed before stay the old key's; every one signed since is the new key's.
    for kind in ("heads", "checkpoints"):
        assert after[kind][: len(before[kind])] == before[kind]
        assert set(after[kind][len(before[kind]) :]) == {new}, kind
    assert after["settings"][-1] == new
    # The stored policy lists both log keys; /history/vkey serves the new one.
    with Log.open(data) as log:
        stored = log.store.policy()
        assert stored is not None
        assert {entry.verifier.vkey() for entry in parse_policy(stored).logs} == {
            old_vkey,
            published["vkey"],
        }
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        assert client.get("/history/vkey").text.strip() == published["vkey"] == done["vkey"]
        assert served_kids(client) == {old, new}
        assert token_kid(record_token(client, "before")) == new
    # The old key's heads still verify: the audit, and the export re-written over the old one.
    assert ok("audit", "--data", data)["ok"] is True
    ok("export", "--data", data, out)
    assert ok("audit", "--data", data, "--roots", out)["ok"] is True


# --- crashes ---------------------------------------------------------------------------------


def test_a_crash_in_phase_one_before_the_commit_resumes_with_the_same_key(data: Path) -> None:
    """Killed after the next key file was written, before the transaction: a rerun takes
    that file (nothing was published with it, so it may also be replaced if half written)."""
    from capability_anchor.keys import create_key_file

    left = create_key_file(data / "signing-key.jwk.new")
    published = ok("rotate-key", "--data", data)
    assert published["kid"] == left.kid


def test_a_half_written_next_key_from_a_crash_is_replaced(data: Path) -> None:
    path = data / "signing-key.jwk.new"
    path.write_bytes(b'{"kty":"OKP","crv":"Ed25')
    os.chmod(path, 0o600)
    published = ok("rotate-key", "--data", data)
    assert published["kid"] == kid_file(data, "signing-key.jwk.new")


def test_a_crash_in_activation_after_the_commit_resumes_by_swapping_the_file(
    data: Path,
) -> None:
    """The state between the activation's commit and the key file swap: the log refuses to
    open, saying to rerun; the rerun only swaps the file."""
    ok("rotate-key", "--data", data)
    done = ok("rotate-key", "--data", data, "--activate", "--force")
    backup = data / f"signing-key.{done['old_kid']}.jwk"
    (data / "signing-key.jwk").rename(data / "signing-key.jwk.new")
    shutil.copy2(backup, data / "signing-key.jwk")
    refused = cli("checkpoint", "--data", data)
    assert refused.returncode == 1 and "rotate-key --activate" in refused.stderr
    with raw(data) as conn:
        before = conn.execute("SELECT COUNT(*) FROM key_records").fetchone()[0]
    resumed = ok("rotate-key", "--data", data, "--activate")
    assert (resumed["old_kid"], resumed["kid"]) == (done["old_kid"], done["kid"])
    assert kid_file(data) == done["kid"]
    with raw(data) as conn:
        assert conn.execute("SELECT COUNT(*) FROM key_records").fetchone()[0] == before
    assert ok("audit", "--data", data)["ok"] is True


def test_a_crash_in_activation_before_the_commit_resumes(data: Path) -> None:
    """Killed after the old key's backup link, before the transaction: a rerun does all."""
    published = ok("rotate-key", "--data", data)
    os.link(data / "signing-key.jwk", data / f"signing-key.{published['current_kid']}.jwk")
    done = ok("rotate-key", "--data", data, "--activate", "--force")
    assert done["kid"] == published["kid"] == kid_file(data)
    assert ok("audit", "--data", data)["ok"] is True


def _retimed(token: str, activate_at: int) -> str:
    """The pending rotation with another activation time and the old signature."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["activate_at"] = activate_at
    moved = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{moved}.{signature}"


def test_a_pending_rotation_moved_in_the_database_is_detected_and_refused(data: Path) -> None:
    ok("rotate-key", "--data", data)
    with raw(data) as conn:
        (token,) = conn.execute("SELECT value FROM meta WHERE key = 'pending_rotation'").fetchone()
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'pending_rotation'", (_retimed(token, 0),)
        )
    audit = cli("audit", "--data", data)
    assert audit.returncode == 1
    assert "meta.pending_rotation" in audit.stderr, audit.stderr
    refused = cli("rotate-key", "--data", data, "--activate")
    assert refused.returncode == 1, refused.stderr
    assert kid_file(data) != kid_file(data, "signing-key.jwk.new")
    with Log.open(data) as log, pytest.raises(VerificationError):
        rotation.pending_rotation(log)


def test_activate_without_publish_in_process_raises_not_found(data: Path) -> None:
    with pytest.raises(NotFound):
        rotation.activate(data, Log.open)


# --- a running service adopts both phases ----------------------------------------------------


def _until(check: Any, what: str, limit: float = 30.0) -> None:
    """Poll `check` (a bounded wait for another process, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"not within {limit} s: {what}"
        time.sleep(0.1)


def _stages(server: Any, data: Path) -> None:
    """Records before, between and after the phases, through the running server: each
    stage's heads and tokens are signed by the right key, and no request fails."""
    headers = server.writer_headers()
    with server.client() as client:
        post(client, headers, "live-before")
        old = kid_file(data)
        assert token_kid(record_token(client, "live-before")) == old
        published = ok("rotate-key", "--data", data)
        nxt = published["kid"]
        # Every process lists the next key within seconds (several requests: several workers).
        _until(lambda: all(served_kids(client) == {old, nxt} for _ in range(6)), "/keys")
        heads_before = len(signed_kids(data)["heads"])
        post(client, headers, "live-between")
        for _ in range(6):
            assert token_kid(record_token(client, "live-between")) == old
        between = signed_kids(data)
        assert set(between["heads"][heads_before:]) == {old}
        assert nxt not in {k for kinds in between.values() for k in kinds}
        ok("rotate-key", "--data", data, "--activate", "--force")
        heads_before = len(signed_kids(data)["heads"])
        post(client, headers, "live-after")
        for _ in range(6):
            assert token_kid(record_token(client, "live-after")) == nxt
            assert client.get("/history/vkey").text.strip() == published["vkey"]
        after = signed_kids(data)
        assert set(after["heads"][heads_before:]) == {nxt}
        assert after["checkpoints"][-1] == nxt


def test_a_running_serve_adopts_both_phases_without_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    ok("init", "--data", data, "--iss", f"http://127.0.0.1:{port}")
    with serving(data, "--rate-limit", "0", "--checkpoint-interval", "1", port=port) as server:
        _stages(server, data)
        assert server.alive()
    assert ok("audit", "--data", data)["ok"] is True


def test_the_asgi_form_under_two_workers_adopts_both_phases(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    init = cli("init", "--data", data, "--iss", f"http://127.0.0.1:{port}")
    assert init.returncode == 0, init.stderr
    env = clean_env(
        {
            "CAPABILITY_ANCHOR_DATA": str(data),
            "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1",
            "CAPABILITY_ANCHOR_RATE_LIMIT": "0",
        }
    )
    with serving(data, argv=uvicorn_argv(port, 2), env=env, port=port) as server:
        _stages(server, data)
    assert ok("audit", "--data", data)["ok"] is True


def test_rotate_key_help_shows_each_default() -> None:
    done = cli("rotate-key", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "(default: 3600)" in text
    for option in ("--activate", "--force", "--compromised", "--json"):
        assert option in text

    done = cli("rotate-key", "--data", "/nonexistent", "--json")
    assert done.returncode == 2


def test_the_policy_gains_the_new_log_line_after_the_last_one_and_keeps_every_other_byte() -> None:
    old, new = (
        format_vkey("resolver.example/history", TYPE_ED25519, SigningKey.generate().public.raw)
        for _ in range(2)
    )
    witness = Cosigner("w.example", SigningKey.generate()).verifier.vkey()
    text = f"# ours\nlog {old}\n\nwitness w1 {witness}\nquorum w1\n".encode()
    both = rotation.policy_with(text, new, keep=old, drop=None)
    assert both == f"# ours\nlog {old}\nlog {new}\n\nwitness w1 {witness}\nquorum w1\n".encode()
    assert rotation.policy_with(both, new, keep=old, drop=None) == both  # a rerun adds nothing
    # --compromised: the revoked key's line goes.
    assert rotation.policy_with(text, new, keep=None, drop=old) == (
        f"# ours\nlog {new}\n\nwitness w1 {witness}\nquorum w1\n".encode()
    )
    # A policy without log lines gets both.
    bare = f"witness w1 {witness}\nquorum w1\n".encode()
    assert rotation.policy_with(bare, new, keep=old, drop=None).startswith(
        f"log {old}\nlog {new}\n".encode()
    )


def test_json_leaves_out_the_sentence(data: Path) -> None:
    done = cli("rotate-key", "--data", data, "--json")
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["phase"] == "published"


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def test_activation_after_the_notice_under_libfaketime(data: Path) -> None:
    """The real command, its wall clock moved by libfaketime: refused a minute before the
    notice ends, accepted once it has."""
    import subprocess

    from tests.kit.serverkit import CLI
    from tests.kit.systools import ensure_tool

    lib = ensure_tool(LIBFAKETIME, "faketime", "libfaketime", timeout=600)
    published = ok("rotate-key", "--data", data, "--notice", "3600")
    argv = [str(CLI), "rotate-key", "--data", str(data), "--activate"]

    def run(offset: str) -> subprocess.CompletedProcess[str]:
        env = clean_env({"LD_PRELOAD": str(lib), "FAKETIME": offset})
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)

    early = run("+3540s")
    assert early.returncode == 1 and published["activate_at"] in early.stderr, early.stderr
    late = run("+3660s")
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["kid"] == published["kid"] == kid_file(data)

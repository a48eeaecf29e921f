"""Run in `.venv-c2sp` (tests/kit/c2spkit.py), never imported by the tests: one JSON request on
stdin, one JSON answer on stdout, using only aics-tlog (an independent C2SP implementation)
and the standard library.

Requests:
- `{"op": "verify", "note", "log_vkey", "witness_vkeys", "quorum", "origin"}`: aics-tlog's
  checkpoint verification; answers its verdict, the witnesses it counted and its error.
- `{"op": "sign", "log_seed", "origin", "size", "root", "witnesses": [{"name", "seed",
  "time"}]}`: a checkpoint signed and cosigned by aics-tlog; answers the note and vkeys.
- `{"op": "vkey", "name", "seed", "type"}`: aics-tlog's vkey for a key.
"""

from __future__ import annotations

import base64
import json
import sys

import aics_tlog
from aics_tlog.note import Note
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def _key(seed_hex: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))


def verify(req: dict) -> dict:
    try:
        note = aics_tlog.parse_note(req["note"].encode("utf-8"))
    except ValueError as exc:
        return {"ok": False, "error": f"parse: {exc}", "witnesses": []}
    result = aics_tlog.verify_checkpoint(
        note,
        aics_tlog.parse_vkey(req["log_vkey"]),
        [aics_tlog.parse_vkey(v) for v in req["witness_vkeys"]],
        req["quorum"],
        expected_origin=req.get("origin"),
    )
    return {
        "ok": result.ok,
        "log_ok": result.log_ok,
        "error": result.error,
        "witnesses": result.witnesses,
        "timestamps": result.timestamps,
    }


def sign(req: dict) -> dict:
    cp = aics_tlog.Checkpoint(req["origin"], req["size"], base64.b64decode(req["root"]))
    log_key = _key(req["log_seed"])
    note = aics_tlog.sign_checkpoint(cp, log_key, req["origin"])
    lines = list(note.signatures)
    vkeys = []
    for w in req["witnesses"]:
        key = _key(w["seed"])
        _, line = aics_tlog.sign_cosignature(key, w["name"], w["time"], cp.origin, cp.size, cp.root)
        lines.append(line)
        vkeys.append(aics_tlog.format_vkey(aics_tlog.cosignature_vkey(w["name"], key.public_key())))
    signed = Note(text=note.text, signatures=tuple(lines))
    log_vkey = aics_tlog.format_vkey(
        aics_tlog.vkey_from_ed25519(req["origin"], log_key.public_key())
    )
    return {"note": signed.serialise(), "log_vkey": log_vkey, "witness_vkeys": vkeys}


def vkey(req: dict) -> dict:
    key = _key(req["seed"]).public_key()
    made = aics_tlog.vkey_from_ed25519(req["name"], key, key_type=req["type"])
    return {"vkey": aics_tlog.format_vkey(made)}


def main() -> None:
    req = json.load(sys.stdin)
    answer = {"verify": verify, "sign": sign, "vkey": vkey}[req["op"]](req)
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()

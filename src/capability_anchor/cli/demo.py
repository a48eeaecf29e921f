"""`capability-anchor demo`: the kernel end to end. It anchors a batch of Capability Resolution
records as a resolver-2 resolver does (leaves, one tree, a signed head, record tokens with `anchor`
and `proof`), then checks every output with the verifying kernel alone; the key is a real key file,
and the files can be checked with any JOSE library."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor import jws, leaf, merkle
from capability_anchor.encoding import hash_from_hex
from capability_anchor.errors import InvalidRecord, UsageError
from capability_anchor.keys import KeySet, create_key_file, load_key_file

DEFAULT_ISS = "https://resolver.example"
RECORD_LIFETIME = 24 * 3600

SAMPLE_SERVERS = [
    ("mail", "https://mail.example.com/mcp", "Mail", "ok"),
    ("invoices", "https://example.com/billing/mcp", "Invoices", "sign_in"),
    ("weather", "https://weather.example.org/mcp", "Weather", "ok"),
    ("maps", "https://maps.example.net:8443/mcp", "Maps", "down"),
    ("search", "https://search.example.io/mcp", "Search", "ok"),
]


def sample_records(iss: str, now: dt.datetime) -> list[dict[str, Any]]:
    checked = (now - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {
            "v": "0.2",
            "iss": iss,
            "sub": f"example:{slug}",
            "url": url,
            "name": name,
            "status": status,
            "checked_at": checked,
            "first_seen": "2026-10-02",
            "evidence": {"record": f"{iss}/record?id=example:{slug}", "method": f"{iss}/method"},
        }
        for slug, url, name, status in SAMPLE_SERVERS
    ]


def cmd_demo(args: argparse.Namespace) -> int:
    # `DIR/demo` with `--data DIR`, else a new temporary folder (never a real log's).
    if args.data is not None:
        out = Path(args.data) / "demo"
    else:
        out = Path(tempfile.mkdtemp(prefix="capability-anchor-demo-"))
    iss, records_file = args.iss, args.records
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    key_file = out / "signing-key.jwk"
    if key_file.exists():
        key = load_key_file(key_file)
    else:
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key = create_key_file(key_file)
    keys = KeySet.of(key.public)

    # 1. Leaves: validated, canonical, hashed.
    if records_file is None:
        records = sample_records(iss, now)
    else:
        text = records_file.read_bytes().splitlines()
        try:
            parsed = [leaf.parse_json(line) for line in text if line.strip()]
        except InvalidRecord as exc:
            raise UsageError(str(exc)) from None  # malformed JSON: exit 2 in every command
        records = [leaf.validate_record(r) for r in parsed]
    tree = merkle.TiledTree(leaf.leaf_hash(r) for r in records)

    # 2. A signed head over the tree (an unsealed checkpoint of today).
    day = now.date().isoformat()
    signed_head = heads.sign(
        heads.make_claims(
            iss=iss,
            day=day,
            tree_size=tree.size,
            root=tree.root(),
            sealed=False,
            prev=None,
            iat=int(now.timestamp()),
        ),
        key,
    )
    claims, head_jws = signed_head.claims, signed_head.jws
    head_bytes = signed_head.document()

    # 3. Each record re-issued for resolver-2: anchor + proof, signed as a record token.
    issued = []
    for index, record in enumerate(records):
        anchor = {
            "day": day,
            "root": claims["root"],
            "url": heads.anchor_url(iss, day, tree.size, sealed=False),
        }
        proof = heads.proof_json(index, tree.size, tree.inclusion_proof(index))
        issued.append(
            jws.sign_record(
                leaf.leaf_claims(record),
                anchor=anchor,
                proof=proof,
                key=key,
                iat=int(now.timestamp()),
                lifetime=RECORD_LIFETIME,
            )
        )

    # 4. Audit everything from the published bytes only, trusting just the public key set.
    head = jws.verify_claims(head_jws, keys, jws.HEAD_TYP)
    root = hash_from_hex(head["root"], "head root")
    at = int(time.time())
    for record in issued:
        signed = jws.verify_record_token(record["jws"], keys, iss=iss, at=at)
        proof = signed["proof"]
        merkle.verify_inclusion(
            leaf.leaf_hash(signed),
            proof["leaf_index"],
            proof["tree_size"],
            [hash_from_hex(h, "path element") for h in proof["path"]],
            root,
        )
        if head["tree_size"] != proof["tree_size"] or head["root"] != signed["anchor"]["root"]:
            raise AssertionError("demo produced an anchor that disagrees with its head")

    out.mkdir(parents=True, exist_ok=True)
    (out / "keys.json").write_bytes(keys.to_json())
    (out / f"head-{day}-{tree.size}.json").write_bytes(head_bytes)
    with (out / "records.jsonl").open("w", encoding="utf-8") as f:
        for record in issued:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")

    sys.stdout.write(head_bytes.decode("utf-8") + "\n")
    print(
        f"anchored {tree.size} records in one RFC 9162 tree, root {claims['root']}\n"
        f"signed head (kid {key.kid}) and {len(issued)} resolver-2 record tokens;\n"
        f"re-verified every token, leaf and inclusion proof against keys.json: all passed\n"
        f"wrote {out}/keys.json, head-{day}-{tree.size}.json, records.jsonl",
        file=sys.stderr,
    )
    return 0

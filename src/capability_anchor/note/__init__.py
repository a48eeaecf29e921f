"""C2SP formats, pure (SPEC §12.2-§12.5): signed notes (`signed`), checkpoints, cosignatures,
tlog-policy and a checkpoint's witnesses (`policy`), tlog-proof; bytes in, validated objects or a
`NoteError` out. On the verifying path: may import `merkle/`, `keys/`, `errors` and `record.urls`
(the one origin ladder); nothing with I/O."""

from .checkpoint import (
    Checkpoint,
    open_checkpoint,
    origin_from_url,
    parse_checkpoint,
    sign_checkpoint,
)
from .cosignature import Cosigner, cosignature_verifier
from .policy import Policy, PolicyWitness, check_cosignatures, parse_policy
from .proof import TlogProof, parse_tlog_proof
from .signed import (
    EM_DASH,
    TYPE_ED25519,
    Note,
    NoteSigner,
    NoteVerifier,
    Signature,
    Verifier,
    format_vkey,
    key_id,
    note_verifier,
    open_note,
    parse_note,
    parse_vkey,
    sign_note,
)

__all__ = [
    "EM_DASH",
    "TYPE_ED25519",
    "Checkpoint",
    "Cosigner",
    "Note",
    "NoteSigner",
    "NoteVerifier",
    "Policy",
    "PolicyWitness",
    "Signature",
    "TlogProof",
    "Verifier",
    "check_cosignatures",
    "cosignature_verifier",
    "format_vkey",
    "key_id",
    "note_verifier",
    "open_checkpoint",
    "open_note",
    "origin_from_url",
    "parse_checkpoint",
    "parse_note",
    "parse_policy",
    "parse_tlog_proof",
    "parse_vkey",
    "sign_checkpoint",
    "sign_note",
]

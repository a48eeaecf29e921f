"""Which exit codes each command can give (SPEC §10, plus 130 for an interrupted `append`) and what
each means there: each subcommand's `--help` epilog is made from this table. A command that opens a
log lists 1 (its start-up self-check); the table is checked against the error classes each command's
path can raise."""

from __future__ import annotations

USAGE = "usage or I/O error (bad arguments, no log at DIR, an unreadable file, a busy store)"
SELF_CHECK = "the log's start-up self-check failed"
NOT_COMPARED = (
    "a restored copy (`backup`'s mark) that no published reference was compared with: "
    "give --published URL|DIR (or --published none)"
)

EXIT_CODES_OF: dict[str, dict[int, str]] = {
    "init": {
        0: "created the log",
        1: "refused: a log already exists in DIR",
        2: "usage or I/O error (bad arguments, an unreadable file or policy, a bad token)",
    },
    "append": {
        0: "every record is stored (new or a duplicate)",
        1: f"an invalid record (nothing stored), or {SELF_CHECK}",
        2: "usage or I/O error, or malformed JSON (nothing stored)",
        130: "interrupted (Ctrl-C): the records stored so far are counted on stderr",
    },
    "checkpoint": {
        0: "printed today's newest head (null: none yet)",
        1: f"refused: the data dir is behind what was published (run `recover`), or {SELF_CHECK}",
        2: f"{USAGE}, or {NOT_COMPARED}",
    },
    "seal": {
        0: "sealed every past day (or there was nothing to seal)",
        1: f"refused: the data dir is behind what was published (run `recover`), or {SELF_CHECK}",
        2: f"{USAGE}, or {NOT_COMPARED}",
    },
    "timestamp": {
        0: "every stamp asked for was made",
        1: f"a TSA failed to stamp (reported on stderr), or {SELF_CHECK}",
        2: f"{USAGE}, or no TSA given or stored",
    },
    "proof": {0: "printed the proof", 1: f"no such entry or head, or {SELF_CHECK}", 2: USAGE},
    "consistency": {
        0: "printed the proof",
        1: f"no head of those sizes, or {SELF_CHECK}",
        2: USAGE,
    },
    "rotate-key": {
        0: "published the next key (phase 1), or now signing with it (--activate, --compromised)",
        1: "--activate refused: before the time activation is allowed (--force overrides), "
        "no rotation pending, or a pending rotation not signed by the key file's key; or "
        f"{SELF_CHECK}",
        2: f"{USAGE}, or the next key file is missing or unreadable",
    },
    "export": {
        0: "wrote (or found unchanged) every file",
        1: f"a file in OUTDIR holds other bytes (nothing overwritten), or {SELF_CHECK}",
        2: USAGE,
    },
    "audit": {
        0: "every check passed",
        1: "the audit found a problem (named on stdout)",
        2: f"{USAGE}, or no log and no --roots folder",
    },
    "backup": {
        0: "DEST holds a complete copy (history size and root printed), marked as a restored "
        "copy (restored-copy.json)",
        2: f"{USAGE}, DEST not empty, or a file a restore needs is missing from DIR",
    },
    "migrate": {
        0: "moved: the copy's export equals the source's byte for byte, both audits passed, "
        "and DIR now opens the new store",
        1: "refused: a log exists at URL, the copy is not proven, or the log changed meanwhile "
        "(nothing switched), or the source's self-check failed",
        2: f"{USAGE}, a service running on DIR, or DIR already moved",
    },
    "policy": {
        0: "stored the policy",
        1: SELF_CHECK,
        2: "usage or I/O error, or a policy that is malformed or does not name the log's key",
    },
    "cosign": {
        0: "every witness cosigned (or there was none to ask)",
        1: f"a witness failed or refused (one JSON line each), the data dir is behind what "
        f"was published (run `recover`), or {SELF_CHECK}",
        2: f"{USAGE}, or {NOT_COMPARED}",
    },
    "recover": {
        0: "the data dir holds everything the source published (what was recovered on "
        "stdout); a restored copy's mark is cleared",
        1: "refused: the published data do not verify, or this data dir conflicts with them "
        "(nothing stored)",
        2: "usage or I/O error (no log at DIR, an unreadable source, a missing tile)",
    },
    "reindex": {
        0: "the /record index holds every row the stored entries imply (rows added on stdout)",
        1: SELF_CHECK,
        2: USAGE,
    },
    "monitor": {
        0: "consistent: nothing the log signed contradicts itself",
        1: "an alarm: evidence that the log misbehaved (with --strict, also a stale checkpoint)",
        2: "usage, I/O or configuration error, with the fix named (the log is not accused)",
    },
    "serve": {
        0: "stopped cleanly by SIGTERM or SIGINT (in-flight requests finished)",
        1: SELF_CHECK,
        2: "usage or I/O error (no log at DIR, a bad writer token, a taken port), or "
        f"{NOT_COMPARED}",
    },
    "witness": {
        0: "done",
        1: "refused: a witness already exists in DIR, or the log has other keys",
        2: "usage or I/O error",
    },
    "witness init": {
        0: "created the witness",
        1: "refused: a witness already exists in DIR",
        2: "usage or I/O error (a bad --name, an unwritable DIR)",
    },
    "witness info": {
        0: "printed the witness's name, vkey and submission prefix",
        2: "usage or I/O error (no witness at DIR, a bad key file)",
    },
    "witness add-log": {
        0: "the log is witnessed",
        1: "refused: the log is already configured with other keys (`witness update-log`)",
        2: "usage or I/O error (a bad --origin or --vkey, more than 16 keys, no witness at DIR)",
    },
    "witness update-log": {
        0: "the log's key set is replaced (or was already that set)",
        2: "usage or I/O error (no --vkey, a bad --origin or --vkey, a vkey not named for "
        "--origin, more than 16 keys, an origin the witness does not know: add it with "
        "`witness add-log`, no witness at DIR); nothing stored",
    },
    "witness serve": {
        0: "stopped cleanly by SIGTERM or SIGINT (in-flight requests finished)",
        2: "usage or I/O error (no witness at DIR, a bad key file, a taken port)",
    },
    "demo": {
        0: "every token, leaf and proof verified",
        1: "a given record is invalid",
        2: "usage or I/O error (malformed JSON, an unreadable file, a bad key file)",
    },
}

# The top level: every code some command gives.
ALL = {
    0: "done (every check passed)",
    1: "refused or a failed check (an invalid record, an audit problem, a failed stamp, an alarm)",
    2: "usage or I/O error (bad arguments, no log at DIR, unreadable file, taken port, busy)",
    130: "append interrupted by Ctrl-C",
}


def epilog(codes: dict[int, str]) -> str:
    """The `exit codes:` block of a `--help`, one code a line."""
    return "exit codes:\n" + "\n".join(f"  {code:<2} {text}" for code, text in codes.items())


def epilog_of(command: str) -> str:
    return epilog(EXIT_CODES_OF[command])

"""C2SP tlog-policy: the known logs and witnesses and the quorum a checkpoint's cosignatures must
meet (`log`, `witness`, `group`, `quorum` lines; names refer only to earlier lines, exactly one
quorum, every error names its line), and a checkpoint's cosignatures checked against it (SPEC §12.5
check 9): a known witness's bad or future cosignature is reported, never skipped, and
`Witnessed.require` fails on it even when the quorum holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from capability_anchor.errors import (
    MalformedNote,
    MalformedPolicy,
    MalformedVKey,
    NoteError,
    NoteSignatureError,
    QuorumNotMet,
)

from .checkpoint import parse_size
from .cosignature import CosignatureVerifier, cosignature_verifier, timestamp_of
from .signed import Note, NoteVerifier, note_verifier

NONE = "none"
# tlog-policy recommends supporting at least 32 logs, witnesses and groups; a policy file
# past these limits is refused rather than evaluated.
MAX_LOGS = 64
MAX_WITNESSES = 256
MAX_GROUPS = 256
MAX_POLICY_SIZE = 256 * 1024


@dataclass(frozen=True)
class PolicyLog:
    verifier: NoteVerifier
    url: str | None


@dataclass(frozen=True)
class PolicyWitness:
    name: str
    verifier: CosignatureVerifier
    url: str | None


@dataclass(frozen=True)
class Group:
    name: str
    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    """A parsed policy; `quorum` is a witness or group name, or `none`."""

    logs: tuple[PolicyLog, ...]
    witnesses: tuple[PolicyWitness, ...]
    groups: tuple[Group, ...]
    quorum: str

    def witness(self, name: str) -> PolicyWitness | None:
        return next((w for w in self.witnesses if w.name == name), None)

    def satisfied_by(self, cosigned: Iterable[str]) -> bool:
        """Whether the witnesses named in `cosigned` (each verified) meet the quorum."""
        return _meets(self, self.quorum, frozenset(cosigned))

    def require_quorum(self, cosigned: Iterable[str]) -> None:
        """QuorumNotMet, naming what is missing, unless `cosigned` meets the quorum."""
        names = frozenset(cosigned)
        if not _meets(self, self.quorum, names):
            raise QuorumNotMet(
                f"quorum {self.quorum} not met: {_explain(self, self.quorum, names)}; "
                f"cosigned by {', '.join(sorted(names)) or 'no known witness'}"
            )


def _witnessed(policy: Policy, cosigned: frozenset[str]) -> dict[str, bool]:
    """Whether each name witnessed, in definition order: groups name earlier names, so one pass."""
    done = {w.name: w.name in cosigned for w in policy.witnesses}
    for group in policy.groups:
        done[group.name] = sum(done[m] for m in group.members) >= group.threshold
    done[NONE] = True
    return done


def _meets(policy: Policy, name: str, cosigned: frozenset[str]) -> bool:
    return _witnessed(policy, cosigned).get(name, False)


def _explain(policy: Policy, name: str, cosigned: frozenset[str]) -> str:
    done = _witnessed(policy, cosigned)
    group = next((g for g in policy.groups if g.name == name), None)
    if group is None:
        return f"no cosignature by {name}"
    missing = [m for m in group.members if not done[m]]
    have = len(group.members) - len(missing)
    return (
        f"group {name} needs {group.threshold} of {len(group.members)}, has {have} "
        f"(missing {', '.join(missing)})"
    )


# --- parsing --------------------------------------------------------------------------------


class _Builder:
    """The state of a parse: what earlier lines defined."""

    def __init__(self) -> None:
        self.logs: list[PolicyLog] = []
        self.witnesses: list[PolicyWitness] = []
        self.groups: list[Group] = []
        self.quorum: str | None = None
        self.names: set[str] = set()

    def define(self, name: str) -> None:
        if name == NONE:
            raise MalformedPolicy("'none' is predefined and cannot be defined")
        if name in self.names:
            raise MalformedPolicy(f"{name!r} is already defined")
        self.names.add(name)

    def log(self, args: list[str]) -> None:
        if len(args) not in (1, 2):
            raise MalformedPolicy("a log line is 'log <vkey> [<url>]'")
        verifier = note_verifier(args[0])
        if any(entry.verifier.public_key == verifier.public_key for entry in self.logs):
            raise MalformedPolicy("a log with this public key is already listed")
        if len(self.logs) >= MAX_LOGS:
            raise MalformedPolicy(f"more than {MAX_LOGS} logs")
        self.logs.append(PolicyLog(verifier, args[1] if len(args) == 2 else None))

    def witness(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            raise MalformedPolicy("a witness line is 'witness <name> <vkey> [<url>]'")
        verifier = cosignature_verifier(args[1])
        if any(entry.verifier.public_key == verifier.public_key for entry in self.witnesses):
            raise MalformedPolicy("a witness with this public key is already listed")
        if len(self.witnesses) >= MAX_WITNESSES:
            raise MalformedPolicy(f"more than {MAX_WITNESSES} witnesses")
        self.define(args[0])
        url = args[2] if len(args) == 3 else None
        self.witnesses.append(PolicyWitness(args[0], verifier, url))

    def group(self, args: list[str]) -> None:
        if len(args) < 3:
            raise MalformedPolicy("a group line is 'group <name> <k|all|any> <member>...'")
        name, rule, members = args[0], args[1], args[2:]
        for member in members:
            if member == NONE:
                raise MalformedPolicy("'none' cannot be a group member")
            if member not in self.names:
                raise MalformedPolicy(f"group {name}: {member!r} is not defined on an earlier line")
        if len(set(members)) != len(members):
            raise MalformedPolicy(f"group {name}: a member is listed twice")
        threshold = _threshold(rule, len(members))
        if len(self.groups) >= MAX_GROUPS:
            raise MalformedPolicy(f"more than {MAX_GROUPS} groups")
        self.define(name)
        self.groups.append(Group(name, threshold, tuple(members)))

    def set_quorum(self, args: list[str]) -> None:
        if len(args) != 1:
            raise MalformedPolicy("a quorum line is 'quorum <name>'")
        if self.quorum is not None:
            raise MalformedPolicy("a policy has exactly one quorum line")
        if args[0] != NONE and args[0] not in self.names:
            raise MalformedPolicy(f"quorum {args[0]!r} is not defined on an earlier line")
        self.quorum = args[0]


def _threshold(rule: str, members: int) -> int:
    if rule == "all":
        return members
    if rule == "any":
        return 1
    try:
        k = parse_size(rule, "a group threshold")
    except MalformedNote:
        raise MalformedPolicy(f"a group threshold is all, any or k, got {rule!r}") from None
    if not 1 <= k <= members:
        raise MalformedPolicy(f"a group threshold k must be 1 to {members}, got {k}")
    return k


def _check_octets(data: bytes) -> str:
    if len(data) > MAX_POLICY_SIZE:
        raise MalformedPolicy(f"a policy file is at most {MAX_POLICY_SIZE} bytes")
    for number, line in enumerate(data.split(b"\n"), 1):
        if any((b < 0x20 and b != 0x09) or b == 0x7F for b in line):
            raise MalformedPolicy(f"line {number}: only tab and newline may be control characters")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedPolicy(f"a policy file must be UTF-8 (byte {exc.start})") from None


def parse_policy(data: bytes) -> Policy:
    """The policy in `data`, or MalformedPolicy naming the line at fault."""
    builder = _Builder()
    actions = {
        "log": builder.log,
        "witness": builder.witness,
        "group": builder.group,
        "quorum": builder.set_quorum,
    }
    for number, line in enumerate(_check_octets(data).split("\n"), 1):
        items = line.replace("\t", " ").split(" ")
        items = [item for item in items if item]
        if not items or items[0].startswith("#"):
            continue
        action = actions.get(items[0])
        try:
            if action is None:
                raise MalformedPolicy(f"unknown keyword {items[0]!r}")
            action(items[1:])
        except (MalformedPolicy, MalformedVKey, MalformedNote) as exc:
            raise MalformedPolicy(f"policy line {number}: {exc}") from None
    if builder.quorum is None:
        raise MalformedPolicy("the policy has no quorum line")
    return Policy(
        logs=tuple(builder.logs),
        witnesses=tuple(builder.witnesses),
        groups=tuple(builder.groups),
        quorum=builder.quorum,
    )


# --- a checkpoint's cosignatures against the policy -----------------------------------------

MAX_FUTURE_SECONDS = 60


@dataclass(frozen=True)
class Witnessed:
    """`cosigned`: witness -> cosignature time, in policy order; `failed`: witness -> why."""

    policy: Policy
    cosigned: dict[str, int]
    failed: dict[str, str]

    @property
    def ok(self) -> bool:
        return not self.failed and self.policy.satisfied_by(self.cosigned)

    def require(self) -> None:
        """NoteSignatureError for any failed line, else QuorumNotMet unless the quorum is met."""
        if self.failed:
            detail = "; ".join(f"{name}: {why}" for name, why in self.failed.items())
            raise NoteSignatureError(f"cosignature lines failed: {detail}")
        self.policy.require_quorum(self.cosigned)


def check_cosignatures(
    note: Note, policy: Policy, *, at: int, max_future: int = MAX_FUTURE_SECONDS
) -> Witnessed:
    """Check every policy witness's lines in `note` (see the module docstring)."""
    text = note.text.encode("utf-8")
    cosigned: dict[str, int] = {}
    failed: dict[str, str] = {}
    for witness in policy.witnesses:
        ident = (witness.verifier.name, witness.verifier.key_id)
        lines = [s for s in note.signatures if (s.name, s.key_id) == ident]
        if not lines:
            continue
        if len(lines) > 1:
            failed[witness.name] = f"{len(lines)} lines by one key"
            continue
        try:
            witness.verifier.verify(text, lines[0].signature)
            timestamp = timestamp_of(lines[0].signature)
        except NoteError as exc:
            failed[witness.name] = str(exc)
            continue
        if timestamp > at + max_future:
            failed[witness.name] = (
                f"cosignature time {timestamp} is more than {max_future} s after {at}"
            )
            continue
        cosigned[witness.name] = timestamp
    return Witnessed(policy=policy, cosigned=cosigned, failed=failed)

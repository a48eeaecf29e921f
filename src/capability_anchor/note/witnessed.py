"""A checkpoint's cosignatures against a tlog-policy (SPEC §12.5 check 9): which witnesses cosigned,
whose line failed, whether the quorum is met. A known witness's bad or future cosignature is
reported, never skipped, and `require` fails on it even when the quorum holds."""

from __future__ import annotations

from dataclasses import dataclass

from capability_anchor.errors import NoteError, NoteSignatureError

from .cosignature import timestamp_of
from .policy import Policy
from .signed import Note

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

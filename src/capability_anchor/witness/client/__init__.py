"""The witness client (SPEC §12.3, c2sp.org/tlog-witness): the log asks the witnesses of its
policy to cosign the history's newest checkpoint, verifies the answers, and stores the
cosignatures. Witnessing never delays appends, checkpoints, seals or stamps. May import the kernel,
`bounded.post`, the store's contract, `log/` and `metrics/`; never `witness.server`, `api/`
or `cli/`.
"""

from .client import DEFAULT_DEADLINE_S
from .policyfile import check_policy, submitted_to
from .rounds import Outcome, retry_delay, submit
from .schedule import Witnessing, run_round, stored_policy

__all__ = [
    "DEFAULT_DEADLINE_S",
    "Outcome",
    "Witnessing",
    "check_policy",
    "retry_delay",
    "run_round",
    "stored_policy",
    "submit",
    "submitted_to",
]

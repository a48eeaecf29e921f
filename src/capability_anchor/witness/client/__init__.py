"""The witness client (SPEC §12.3): the log asks the witnesses of its policy to cosign the history's
newest checkpoint, verifies the answers and stores the cosignatures; it never delays appends,
checkpoints, seals or stamps. May import the kernel, `bounded/`, the store's contract, `log/` and
`metrics/`; never `witness.server`, `monitor/`, `api/` or `cli/`."""

from .client import DEFAULT_DEADLINE_S
from .rounds import Outcome, retry_delay, submit
from .schedule import Witnessing, run_round

__all__ = [
    "DEFAULT_DEADLINE_S",
    "Outcome",
    "Witnessing",
    "retry_delay",
    "run_round",
    "submit",
]

"""Helper processes die with the process they work for (issue #21: no orphans). Each ties itself to
its parent when it starts: `PR_SET_PDEATHSIG` on Linux (SIGKILL when the parent exits), and
everywhere a thread that leaves at EOF of the parent's sentinel pipe. Why SIGKILL and which
processes: docs/explanation/decisions/36-h5-prose.md."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
EXIT_PARENT_GONE = 3
"""What a helper exits with when its parent is gone (seen only by whoever reaps it)."""


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel for `sig` when this process's parent exits (Linux). Whether it is set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)
    return False


def watch_parent() -> bool:
    """A multiprocessing child leaves (`os._exit`) once its parent is gone; whether it watches."""
    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    if parent is None or sentinel is None:
        return False
    from multiprocessing.connection import wait

    def watch() -> None:
        wait([sentinel])
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="capability-anchor-parent-watch", daemon=True).start()
    return True


def tie_to_parent() -> None:
    """Both ties, for a multiprocessing child (a body worker, a uvicorn worker)."""
    die_with_parent()
    # A parent that died before the prctl above sends no signal; the watch sees its
    # sentinel at EOF at once.
    watch_parent()

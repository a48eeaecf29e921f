"""Helper processes die with the process they work for (issue #21: no orphans).

A kill -9 of `serve` runs none of its shutdown code, so nothing of it can stop its helpers.
Left alone they live for ever: each body worker holds the write end of its own task queue
(so it never reads EOF) and `log.sqlite3` with its WAL open; the forkserver and the
resource tracker wait for the workers, which hold the ends of their pipes. So every helper
ties itself to its parent when it starts, two ways:

- Linux: `PR_SET_PDEATHSIG` (prctl through ctypes): the kernel sends SIGKILL when the
  parent exits. It fires when the *thread* that started the child exits, so only processes
  started from a thread that lives as long as the parent are tied this way: the forkserver
  and uvicorn's workers are started from the main thread, the body workers by the
  single-threaded forkserver.
- Everywhere: a daemon thread that waits on `multiprocessing.parent_process().sentinel`, a
  pipe whose write end only the parent holds (multiprocessing keeps it for the child's
  life); EOF means the parent is gone, and the process leaves at once with `os._exit`. For
  a body worker that parent is the service process itself, not the forkserver in between.

SIGKILL, not SIGTERM: a helper whose parent was killed is part of a crash, and the log is
crash-safe (an unacknowledged batch is either committed whole or not at all); a graceful
stop could wait on a request that nobody will read the answer of.
"""

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
    """If this is a multiprocessing child: leave (`os._exit`) as soon as its parent is gone.
    Whether a watch was started (False: no multiprocessing parent to watch)."""
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


__all__ = ["EXIT_PARENT_GONE", "die_with_parent", "tie_to_parent", "watch_parent"]

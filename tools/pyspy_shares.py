#!/usr/bin/env python3
"""Shares of `serve`'s main thread in a py-spy raw profile, by part of the request path
(issue #37's before/after breakdown in docs/explanation/performance.md). py-spy is not a
dependency: install it anywhere, then

    py-spy record -r 97 --format raw -o h.raw -p <serve's pid> -d 8   # while wrk runs
    .venv/bin/python tools/pyspy_shares.py h.raw 137                  # 137: µs of CPU a request
"""

from __future__ import annotations

import collections
import re
import sys

# Each sample goes to the deepest frame that names a part (so the protocol's socket write
# under Litestar's send is the protocol's).
PARTS = (
    ("metrics", r"prometheus_client/|count_requests"),
    ("access log", r"AccessLog|access_line|_Batch|loggable_path|_utc \("),
    ("before hook", r"before \(capability_anchor|one_spelling|refuse_if_damaged"),
    ("healthz body", r"^healthz \("),
    ("edge wrapper and proxy headers", r"_Exchange|guarded_send|ProxyHeaders|AnchorApp.__call__"),
    ("a sync guard's thread hop", r"authorize_connection|run_in_executor|to_thread"),
    ("Litestar", r"litestar/"),
    ("HTTP protocol and socket", r"httptools|h11|RequestResponseCycle|_OneWritePerAnswer|NoDelay"),
)


def main() -> None:
    samples: collections.Counter[str] = collections.Counter()
    with open(sys.argv[1]) as raw:
        for line in raw:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack.startswith(("<module>", "MainThread")):
                continue
            part = "event loop / other"
            for frame in reversed(stack.split(";")):
                found = next((name for name, pattern in PARTS if re.search(pattern, frame)), None)
                if found:
                    part = found
                    break
            samples[part] += int(count)
    total = sum(samples.values()) or 1
    us = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    for part, n in samples.most_common():
        print(f"{100 * n / total:5.1f}%  {us * n / total:5.0f} µs  {part}")
    print(f"{total} main-thread samples")


if __name__ == "__main__":
    main()

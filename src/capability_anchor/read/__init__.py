"""The read side of a log: what has been published, as the API, export and the audit see it.

`reader`: `LogReader`, one read snapshot of the store (heads, entries, proofs, tiles,
documents); `history`: the history tree's size, roots and proofs (SPEC §12.1); `tiles`: the
tlog-tiles resources of the day trees and the history (SPEC §12.4), and stored tiles as a
tree of a given size reads them; `read.recordnote`: why `/record` found nothing;
`source`: a published log read over HTTP or from an export folder (the monitor, recovery).
Reads only: imports the kernel and the store's interface, never an engine, the
log, the write path or the service.
"""

"""The read side of a log: what has been published, as the API, export and the audit see it.
`source` reads a published log over HTTP or from an export folder (the monitor, recovery).
Reads only: imports the kernel, `note/` and the store's interface, never an engine, the
log, the write path or the service.
"""

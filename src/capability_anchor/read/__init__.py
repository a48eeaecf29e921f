"""The read side of a log: what has been published, as the API, export and the audit see it.
Reads only: imports the kernel, `note/` and the store's interface, never an engine, the
write path or the service.
"""

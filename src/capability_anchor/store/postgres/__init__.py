"""The PostgreSQL engine (issue #24), being built: so far its schema, as frozen migrations
(`migrations/`) with the append-only triggers and the fencing term, the grants of the role
the service connects as (`schema`), and the sequencer's lease (`lease`). It is not
registered in `store/open.py` yet, so no command opens a log on it; that comes with the
engine's reads and writes.

Like `sqlite/`, it is the only code that touches its database: it may import the store's
contract modules, the kernel (`errors`) and its driver, psycopg 3; nothing outside `store/`
imports it.
"""

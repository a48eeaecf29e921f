"""The PostgreSQL schema's migrations, each its DDL frozen as literal SQL (`vN.SQL`), applied
in order by `schema.migrate`. Never change what a shipped migration creates: add one. They
import nothing."""

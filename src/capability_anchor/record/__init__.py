"""The record rule (SPEC §2, Capability Resolution 0.2 §4): what the log accepts as a record.

`rule`: the checks of one record beyond SPEC §2's shape; `fast`: their fast path for the
common record, which only ever accepts; `patterns`: the record's regexes and rule data;
`urls`: canonical server URLs and the log's own origin. Pure: imports only
the kernel (`errors`, `strictjson`), never the store, the log or the service.
"""

"""Loaded by schemathesis's command line (`SCHEMATHESIS_HOOKS=tests.kit.schemathesis_hooks`,
with the repository root on PYTHONPATH): the generators of the record schema's own formats,
`cr-checked-at` and `cr-first-seen` (crkit), which a schema-driven client registers as the
schema's description says. Without them schemathesis draws any string for a format it does
not know."""

from __future__ import annotations

import schemathesis

from . import crkit

for _name, _strategy in crkit.formats().items():
    schemathesis.openapi.format(_name, _strategy)

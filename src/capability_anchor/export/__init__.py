"""Static publication (SPEC §8, §12.4): the files an auditor needs, written create-or-identical.

`days`: the sealed days, heads, stamps, keys and index; `history`: the history's checkpoint,
tiles and entry bundles, as the same bytes the API serves. Imports the read side and the
kernel; it never signs and never writes the store.
"""

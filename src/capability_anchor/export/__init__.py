"""Static publication (SPEC §8, §12.4): the files an auditor needs, written create-or-identical.
Imports the read side and the kernel; it never signs and never writes the store.
"""

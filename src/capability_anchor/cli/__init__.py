"""Command-line edges: argument parsing, exit codes, stdout/stderr. No logic lives here.

The edge of every command: may import any stage; no stage imports it."""

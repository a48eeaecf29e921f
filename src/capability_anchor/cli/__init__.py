"""Command-line edges: argument parsing, exit codes, stdout/stderr. No logic lives here."""

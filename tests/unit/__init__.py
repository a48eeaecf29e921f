"""Unit tests: pure and in process (no files beyond tmp data, no subprocess, no server)."""

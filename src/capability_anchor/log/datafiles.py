"""What a log's data dir holds, and which of its files a restore needs (`backup`); the list is
in docs/explanation/procedures.md.
"""

from __future__ import annotations

from pathlib import Path

from capability_anchor.envvars import TOKEN
from capability_anchor.errors import KeyFileError
from capability_anchor.store import binding
from capability_anchor.store import open as stores

from .writer_token import TOKEN_FILE

KEY_FILE = "signing-key.jwk"
KEY_PREFIX = "signing-key"
RUNTIME_FILES = (
    "background.lock",
    "clock-ack",
    "clock-disagrees",
    "sequencer.lock",
    "sequencer.sock",
)


MOVED_TO = "moved_to"
"""Meta of a SQLite log that `migrate` moved: the URL of its store now."""


def moved_message(data_dir: Path, url: str) -> str:
    return (
        f"the log in {data_dir} moved to {url} (`migrate`): it is opened through the data "
        f"dir's {binding.STORE_FILE}, which is missing; run `capability-anchor migrate --from "
        f"{data_dir} --to {url}` again to finish the move"
    )


def key_files(data_dir: Path) -> list[Path]:
    """Every signing-key file of the data dir (the current key, retired and pending ones)."""
    return sorted(p for p in data_dir.iterdir() if p.name.startswith(KEY_PREFIX) and p.is_file())


def missing_files(data_dir: Path, *, token: bool = True) -> list[str]:
    """The files beside the database `data_dir` lacks (`token`: the writer token's too,
    unless it comes from the environment)."""
    wanted = [KEY_FILE] + ([TOKEN_FILE] if token and not TOKEN.is_set() else [])
    return [name for name in wanted if not (data_dir / name).exists()]


def check_restored(data_dir: Path) -> None:
    """Refuse a data dir with the database but not its key file (restored alone)."""
    missing = missing_files(data_dir)
    if KEY_FILE in missing and stores.exists(data_dir):
        raise KeyFileError(
            f"{data_dir} holds {stores.copy_name(data_dir)} but not {', '.join(missing)}: "
            "the database alone "
            "cannot be restored; restore every file of the backup (`capability-anchor backup "
            "DEST --data DIR` copies the database, every signing-key* file and the "
            "writer-token)"
        )


def is_runtime(data_dir: Path, name: str) -> bool:
    """A file of a running process, not of the log (never copied)."""
    if name in RUNTIME_FILES or stores.is_runtime(data_dir, name):
        return True
    return name.startswith("witness-") and name.endswith(".lock")

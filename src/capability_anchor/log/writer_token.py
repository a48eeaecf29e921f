"""The writer token (`Authorization: Bearer`), read and checked here only: the embedding
program's value, else env CAPABILITY_ANCHOR_TOKEN (even empty), else `DIR/writer-token` (mode
0600); each held to `check_token` (MIN_TOKEN_BYTES of visible ASCII), else `TokenError`.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from capability_anchor.envvars import TOKEN
from capability_anchor.errors import TokenError
from capability_anchor.files import write_secret_file

TOKEN_FILE = "writer-token"  # noqa: S105 - a file name, not a secret
TOKEN_ENV = TOKEN.name
MIN_TOKEN_BYTES = 32
_MAX_TOKEN_FILE = 4096
_WHITESPACE = " \t\r\n"


def create_token_file(path: Path) -> None:
    """Write a fresh token to `path` (mode 0600 from creation; refuses an existing path)."""
    write_secret_file(path, (secrets.token_urlsafe(32) + "\n").encode())


def check_token(value: str, source: str) -> str:
    """`value` stripped, if a usable token; the message names `source`, never the token."""
    token = value.strip(_WHITESPACE)
    if not token:
        raise TokenError(f"the writer token in {source} is empty; refusing to run without one")
    if any(not 0x21 <= ord(c) <= 0x7E for c in token):
        raise TokenError(
            f"the writer token in {source} contains whitespace, control or non-ASCII "
            "characters; it must be one word of visible ASCII"
        )
    if len(token) < MIN_TOKEN_BYTES:
        raise TokenError(
            f"the writer token in {source} is {len(token)} bytes; at least {MIN_TOKEN_BYTES} "
            "are needed (a new one: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return token


def read_token_file(path: Path) -> str:
    """The token in `path`, checked on the open descriptor (O_NONBLOCK: a FIFO never hangs)."""
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise TokenError(
            f"no writer token: {name} does not exist (set env {TOKEN_ENV}, or write a token "
            f"of at least {MIN_TOKEN_BYTES} visible ASCII characters to that file, mode 0600)"
        ) from None
    except OSError as exc:
        raise TokenError(f"cannot open the writer token file {name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"the writer token file {name} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise TokenError(
                f"the writer token file {name} has mode {mode:04o}; it must not be accessible "
                f"to group or others (run: chmod 600 {name})"
            )
        data = os.read(fd, _MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise TokenError(f"cannot read the writer token file {name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > _MAX_TOKEN_FILE:
        raise TokenError(f"the writer token file {name} is over {_MAX_TOKEN_FILE} bytes")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise TokenError(
            f"the writer token in {name} contains non-ASCII bytes; it must be one word of "
            "visible ASCII"
        ) from None
    return check_token(text, name)


def writer_token(
    data_dir: Path, explicit: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """The writer token a process on `data_dir` uses, checked (see the module's rules)."""
    if explicit is not None:
        return check_token(explicit, "the service settings")
    value = TOKEN.get(env)
    if value is not None:
        return check_token(value, f"env {TOKEN_ENV}")
    return read_token_file(Path(data_dir) / TOKEN_FILE)

"""`capability-anchor witness ...`: run a C2SP tlog-witness. `init` makes its data dir, store and
key and prints its cosignature vkey; `add-log` and `update-log` configure a log's keys (`serve`
reads them at every request); `serve` answers `add-checkpoint` and the monitoring endpoint; `info`
prints the name, vkey and submission prefix."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from capability_anchor.envvars import WITNESS_DATA
from capability_anchor.errors import NoteError, UsageError
from capability_anchor.keys import create_key_file

from .common import EXIT_OK, emit
from .exitcodes import epilog_of
from .serve import add_edge_arguments, bind, edge_token, run_on, url_host

# Imported inside functions: the witness server ~530 ms, `note` ~60 ms, the store's registry ~40
# ms (python -X importtime after `cli.operator`, min of 7 runs, 2026-12-05): only `witness`
# commands pay them.

PROG = "capability-anchor witness"
MAX_LOG_KEYS = 16
"""Keys a witnessed log may have at once: a rotation's overlap needs two; every cosign
request of the log parses each of them."""


def witness_data(value: str | None) -> Path:
    return Path(value or WITNESS_DATA.get() or "witness-data")


def add_witness_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(
        dest="witness_command",
        metavar="SUBCOMMAND",
        required=True,
        help="init, info, add-log, update-log or serve",
    )

    def command(
        name: str, text: str, run: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        q = sub.add_parser(
            name,
            help=text,
            description=text,
            formatter_class=p.formatter_class,
            epilog=epilog_of(f"witness {name}"),
        )
        q.set_defaults(witness_run=run)
        q.add_argument(
            "--data",
            metavar="DIR",
            help=f"witness data dir (default: ${WITNESS_DATA.name}, else ./witness-data)",
        )
        return q

    def listen(q: argparse.ArgumentParser) -> None:
        q.add_argument("--host", default="127.0.0.1", help="address to listen on")
        q.add_argument("--port", type=int, default=8380, help="TCP port to listen on")

    q = command("init", "create the witness store and its Ed25519 cosigning key", _init)
    q.add_argument("--name", required=True, help="the witness's key name, e.g. witness.example/w1")
    q = command("info", "print the witness's name, vkey and submission prefix (JSON)", _info)
    listen(q)
    q = command("add-log", "witness a log: its origin line and a vkey of its key", _add_log)
    q.add_argument("--origin", required=True, help="the log's checkpoint origin line")
    q.add_argument(
        "--vkey", required=True, action="append", help="the log's note vkey (repeatable)"
    )
    q = command(
        "update-log",
        "replace a witnessed log's key set (after the log rotated its key)",
        _update_log,
    )
    q.add_argument("--origin", required=True, help="the log's checkpoint origin line")
    q.add_argument(
        "--vkey",
        action="append",
        default=[],
        help="a note vkey of the log's new key set, named for --origin (repeatable: the old "
        f"and the new key during a rotation's overlap; at most {MAX_LOG_KEYS})",
    )
    q = command("serve", "answer add-checkpoint and the monitoring endpoint", _serve)
    listen(q)
    q.add_argument(
        "--rate-limit", type=int, default=100, help="requests/s per client address; 0: off"
    )
    add_edge_arguments(q)


def cmd_witness(args: argparse.Namespace) -> int:
    return int(args.witness_run(args))


def _init(args: argparse.Namespace) -> int:
    from capability_anchor.note import Cosigner
    from capability_anchor.note.signed import check_key_name
    from capability_anchor.store import open as stores
    from capability_anchor.witness.server.protocol import KEY_FILE

    try:
        check_key_name(args.name)
    except NoteError as exc:
        raise UsageError(f"--name: {exc}") from None
    data = witness_data(args.data)
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The store first: it refuses an existing witness before a second key could be made.
    store = stores.create_witness(data, args.name)
    store.close()
    try:
        key = create_key_file(data / KEY_FILE)
    except BaseException:
        # A store without its key could never serve, and would block the next init.
        stores.remove_witness(data)
        raise
    vkey = Cosigner(args.name, key).verifier.vkey()
    emit({"name": args.name, "vkey": vkey, "data": str(data)})
    print(f"{PROG}: created the witness {args.name} in {data}", file=sys.stderr)
    return EXIT_OK


def _info(args: argparse.Namespace) -> int:
    """The name, vkey and `add-checkpoint` prefix a log's policy `witness` line needs."""
    from capability_anchor.witness.server.protocol import Witness

    data = witness_data(args.data)
    with closing(Witness.open(data)) as witness:
        name, vkey = witness.cosigner.name, witness.cosigner.verifier.vkey()
    prefix = f"http://{url_host(args.host)}:{args.port}"
    emit({"name": name, "vkey": vkey, "submission_prefix": prefix, "data": str(data)})
    return EXIT_OK


def _log_keys(args: argparse.Namespace, command: str) -> tuple[str, ...]:
    """The checked, canonical --vkey values for --origin, at most MAX_LOG_KEYS."""
    from capability_anchor.note import note_verifier

    if len(args.vkey) > MAX_LOG_KEYS:
        raise UsageError(
            f"{command}: {len(args.vkey)} --vkey given; a log has at most {MAX_LOG_KEYS} keys"
        )
    try:
        verifiers = [note_verifier(v) for v in args.vkey]
    except NoteError as exc:
        raise UsageError(f"{command}: {exc}") from None
    if not args.origin or any(ord(c) < 0x20 for c in args.origin):
        raise UsageError("--origin is one non-empty line without control characters")
    return tuple(v.vkey() for v in verifiers)


def _add_log(args: argparse.Namespace) -> int:
    from capability_anchor.store import open as stores

    vkeys = _log_keys(args, "add-log")
    with closing(stores.open_witness(witness_data(args.data))) as store:
        store.add_log(args.origin, vkeys, int(time.time()))
    emit({"origin": args.origin, "vkeys": list(vkeys)})
    return EXIT_OK


def _update_log(args: argparse.Namespace) -> int:
    from capability_anchor.store import open as stores

    vkeys = _log_keys(args, "update-log")
    if not vkeys:
        raise UsageError(
            "update-log: give the log's new key set, at least one --vkey (during a "
            "rotation's overlap: the old and the new key)"
        )
    if len(set(vkeys)) != len(vkeys):
        raise UsageError("update-log: a --vkey is given twice")
    with closing(stores.open_witness(witness_data(args.data))) as store:
        if store.log(args.origin) is not None:  # else the store names `add-log`
            # A log signs under its origin: a key named otherwise would verify none of its
            # checkpoints, and the witness would refuse every one of them.
            for vkey in vkeys:
                if (name := vkey.split("+", 1)[0]) != args.origin:
                    raise UsageError(
                        f"update-log: the vkey {vkey} is named {name}, not the log's origin "
                        f"{args.origin}: it would verify none of its checkpoints"
                    )
        old = store.update_log(args.origin, vkeys, int(time.time()))
    emit({"origin": args.origin, "vkeys": list(vkeys), "old_vkeys": list(old)})
    # The change, for the operator's log (a running `witness serve` adopts it at once).
    if old == vkeys:
        print(f"{PROG}: log {args.origin}: key set unchanged ({', '.join(vkeys)})", file=sys.stderr)
    else:
        print(
            f"{PROG}: log {args.origin}: key set replaced: [{', '.join(old)}] -> "
            f"[{', '.join(vkeys)}]",
            file=sys.stderr,
        )
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from capability_anchor.metrics import service as metrics
    from capability_anchor.witness.server.app import create_witness_app
    from capability_anchor.witness.server.protocol import Witness

    if args.rate_limit < 0:
        raise UsageError("--rate-limit must be >= 0")
    token = edge_token(args)  # the access and event log of the log's service, its format too
    sock = bind(args.host, args.port)
    try:
        metrics.prepare(own=True)
        witness = Witness.open(witness_data(args.data))
        app = create_witness_app(witness, rate_limit=args.rate_limit, metrics_token=token)
        run_on(sock, app, header_timeout=10.0, prog=PROG)
    finally:
        sock.close()
    return EXIT_OK

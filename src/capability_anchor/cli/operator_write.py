"""The operator commands that write the log: init, checkpoint, seal, timestamp, rotate-key, and the
witness client's policy and cosign (SPEC §12.3); append is `operator_append`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from capability_anchor import head as heads
from capability_anchor.errors import UsageError

from .common import EXIT_FAILED, EXIT_OK, emit
from .operator_base import PROG, data_dir, emit_doc, open_log, read_policy, refuse_if_behind

# Imported inside functions: the log ~380 ms, the witness client ~330 ms, the log's policies ~190
# ms (python -X importtime after `cli.operator`, min of 7 runs, 2026-12-05): `--help` and the
# other commands skip them.


def cmd_init(args: argparse.Namespace) -> int:
    from capability_anchor.log import Log
    from capability_anchor.log.stamping import TsaConfig
    from capability_anchor.log.writer_token import TOKEN_FILE
    from capability_anchor.store import open as stores

    data = data_dir(args.data)
    tsa = TsaConfig.from_files(args.tsa, args.tsa_ca)
    config = tsa.to_config() if tsa.urls or tsa.ca_pem else None
    policy = None
    if getattr(args, "witness_policy", None) is not None:
        policy = read_policy(args.witness_policy)
    if args.service_role and not args.store:
        raise UsageError("--service-role is for a log in PostgreSQL (--store URL)")
    if args.service_role:
        stores.grant_service(args.store, args.service_role, check_only=True)
    with Log.init(
        data,
        iss=args.iss,
        public_url=args.public_url,
        config=config,
        records=args.records,
        policy=policy,
        id_namespace=args.id_namespace,
        store=args.store,
    ) as log:
        if args.service_role:
            # The data dir then names the service's role: every command and the service
            # connect with only its grants; the owner's URL is for migrations (--store).
            stores.bind(data, stores.grant_service(args.store, args.service_role))
        emit(
            {
                "iss": log.iss,
                "first_day": log.first_day,
                "kid": log.key.kid,
                "data": str(data),
                "records": log.records,
                **({"id_namespace": log.id_namespace} if log.id_namespace else {}),
            }
        )
        print(
            f"{PROG}: created a log in {data}; writer token in {data / TOKEN_FILE}",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    with open_log(args) as log:
        refuse_if_behind(log, args)
        before = log.store.newest_unsealed(log.today())
        doc = log.checkpoint()
        emit_doc(doc)
        if doc is None:
            print(f"{PROG}: no head: today (UTC) has no entries yet", file=sys.stderr)
        elif before is not None and doc == before.doc:
            print(
                f"{PROG}: the tree did not grow since its newest head (tree size "
                f"{before.tree_size}): no new head; printed that one",
                file=sys.stderr,
            )
    return EXIT_OK


def _tsa_config(args: argparse.Namespace, log: Any) -> Any:
    from capability_anchor.log.stamping import TsaConfig

    return TsaConfig.resolve(log.config, args.tsa, args.tsa_ca, args.tsa_deadline)


def _report_stamp(result: Any) -> None:
    print(f"{PROG}: {result.describe()}", file=sys.stderr)


def cmd_seal(args: argparse.Namespace) -> int:
    import time

    from capability_anchor.encoding import utc_second
    from capability_anchor.log.clockguard import acknowledge, disagreeing, monotonic
    from capability_anchor.log.stamping import stamp_missing

    def printed(doc: bytes) -> None:
        # Printed as each day's transaction commits: a printed head is a published head.
        emit_doc(doc)
        sys.stdout.flush()

    # The clock reading that decides what is sealed is the one the operator acknowledges.
    wall, mono = time.time(), monotonic()
    with open_log(args) as log:
        # The TSA configuration is checked before anything is sealed (usage errors first).
        tsa = _tsa_config(args, log)
        refuse_if_behind(log, args)
        sealed = log.seal(printed)
        if not sealed:
            # Still JSON on stdout: an empty list says "nothing sealed" to a script.
            sys.stdout.write("[]\n")
            note = "nothing to seal: every day before today (UTC) is sealed"
            print(f"{PROG}: {note}", file=sys.stderr)
        # A running service whose clocks disagree takes this reading as its new baseline.
        # Written only then, even when nothing was sealed (a jump within today seals nothing,
        # and `seal` is how an operator acknowledges it), and said, with the file named.
        episode = disagreeing(log.data_dir)
        if episode is not None:
            ack = acknowledge(log.data_dir, wall, mono)
            print(
                f"{PROG}: wrote {ack}: the wall clock ({utc_second(wall)}) is acknowledged for a "
                f"running service whose clocks disagree ({episode}): it takes this reading "
                "as its new baseline",
                file=sys.stderr,
            )
        if tsa.urls and sealed:
            days = {heads.parse_document(doc).day for doc in sealed}
            # Fail open: a failed stamp is reported and left for `timestamp` or the service.
            stamp_missing(log, tsa, days=days, on_result=_report_stamp)
    return EXIT_OK


def cmd_timestamp(args: argparse.Namespace) -> int:
    from capability_anchor.log.stamping import stamp_missing

    with open_log(args) as log:
        tsa = _tsa_config(args, log)
        if not tsa.urls:
            raise UsageError("no TSA: give --tsa URL (or store one with init --tsa)")
        failed = False

        def report(result: Any) -> None:
            nonlocal failed
            if result.ok:
                emit(result.to_json())
                sys.stdout.flush()
            else:
                failed = True
                _report_stamp(result)

        stamp_missing(log, tsa, on_result=report)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_rotate_key(args: argparse.Namespace) -> int:
    from capability_anchor.log import Log, rotation

    data = data_dir(args.data)
    if args.activate or args.compromised:
        done = rotation.activate(data, Log.open, force=args.force, compromised=args.compromised)
        emit(done.to_json())
        if args.json:
            return EXIT_OK
        revoked = (
            f"; {done.old_kid} is revoked from {done.to_json()['revoked_at']} and no longer "
            "in /keys"
            if done.revoked_at is not None
            else ""
        )
        print(
            f"{PROG}: now signing with {done.kid} (note key {done.vkey}); the old key "
            f"{done.old_kid} is kept in {done.backup}{revoked}. A running `serve` adopts it "
            "within seconds; re-export, and tell each witness: `witness update-log`.",
            file=sys.stderr,
        )
        return EXIT_OK
    if args.force:
        raise UsageError("--force goes with --activate")
    published = rotation.publish(data, Log.open, args.notice)
    emit(published.to_json())
    if args.json:
        return EXIT_OK
    print(
        f"{PROG}: published the next key {published.kid} (note key {published.vkey}); "
        f"nothing is signed with it yet. Activation is allowed from "
        f"{published.to_json()['activate_at']}: run `capability-anchor rotate-key --activate`.",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_policy(args: argparse.Namespace) -> int:
    from capability_anchor.log.policies import check_policy

    text = read_policy(args.file)
    with open_log(args) as log:
        policy = check_policy(text, log.read.history.vkeys())
        log.set_policy(text)
    emit(
        {
            "witnesses": [w.name for w in policy.witnesses],
            "submitted_to": [w.name for w in policy.witnesses if w.url is not None],
            "quorum": policy.quorum,
        }
    )
    print(f"{PROG}: stored the witness policy from {args.file}", file=sys.stderr)
    return EXIT_OK


def cmd_cosign(args: argparse.Namespace) -> int:
    from capability_anchor.log.policies import check_policy
    from capability_anchor.witness.client import run_round

    with open_log(args) as log:
        # A witness asked for a checkpoint the world has seen superseded would answer 409 and
        # be stopped: behind what was published, nothing is submitted.
        refuse_if_behind(log, args)
        policy = None
        if args.policy is not None:
            policy = check_policy(read_policy(args.policy), log.read.history.vkeys())
        outcomes = run_round(log, policy, deadline=args.witness_deadline, resume=args.resume)
    if not outcomes:
        print(f"{PROG}: no witness with a URL in the policy: nothing to do", file=sys.stderr)
    for outcome in outcomes:
        emit(outcome.to_json())
        if not outcome.ok:
            print(f"{PROG}: witness {outcome.witness}: {outcome.detail}", file=sys.stderr)
    return EXIT_OK if all(o.ok for o in outcomes) else EXIT_FAILED

"""`python3 tools/dev.py tsa`: a local RFC 3161 TSA to try stamping with (issue #35 item 9).

What a new user met: no way to try RFC 3161 stamping locally. The command serves OpenSSL's own
TSA on loopback and prints its URL and CA certificate; these tests take both from its output,
as a user copies them, and stamp a sealed day with the real CLI (`seal --tsa --tsa-ca`), which
`openssl ts -verify` accepts against that CA. Started again on the same folder it keeps its
CA, so earlier stamps still verify; Ctrl-C stops it with exit 0.
"""

from __future__ import annotations

import datetime as dt
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from capability_anchor import head as heads
from capability_anchor.log import Log
from tests.e2e.test_cli_log import run
from tests.kit import paths
from tests.kit.obskit import observation
from tests.kit.tsakit import verify

DEV = paths.ROOT / "tools" / "dev.py"
ISS = "https://resolver.example"


@dataclass
class DevTsa:
    url: str
    ca: Path
    output: str


@contextmanager
def dev_tsa(folder: Path) -> Iterator[DevTsa]:
    """`tools/dev.py tsa --port 0 --dir FOLDER` until its printed instructions end, then
    Ctrl-C (SIGINT) on leaving, which must stop it with exit 0."""
    with subprocess.Popen(
        [sys.executable, str(DEV), "tsa", "--port", "0", "--dir", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        yield from _until_interrupted(proc)


def _until_interrupted(proc: subprocess.Popen[str]) -> Iterator[DevTsa]:
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C stops it"):
                break
        output = "".join(lines)
        url = re.search(r"^RFC 3161 TSA at (http://127\.0\.0\.1:\d+/)$", output, re.M)
        ca = re.search(r"^its CA certificate: (.+)$", output, re.M)
        assert url and ca, output + (proc.stderr.read() if proc.stderr else "")
        yield DevTsa(url.group(1), Path(ca.group(1)), output)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _past_log(data: Path) -> list[str]:
    """A log whose first day was two days ago, with a checkpoint and nothing sealed."""
    noon = dt.datetime.now(dt.UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    start = (noon - dt.timedelta(days=2)).timestamp()
    with Log.init(data, iss=ISS, clock=lambda: start) as log:
        log.append([observation(n, iss=ISS, sub=f"example:{n}") for n in range(3)])
        log.checkpoint()
        first = log.first_day
    return [first, (dt.date.fromisoformat(first) + dt.timedelta(days=1)).isoformat()]


def test_dev_tsa_stamps_what_seal_seals_and_openssl_verifies_with_the_printed_ca(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    days = _past_log(data)
    with dev_tsa(tmp_path / "data-tsa") as tsa:
        # The printed commands name the service's own stamping options.
        assert f"--tsa {tsa.url} --tsa-ca {tsa.ca}" in tsa.output
        result = run("seal", "--tsa", tsa.url, "--tsa-ca", str(tsa.ca), data=data)
        assert result.returncode == 0, result.stderr
        assert result.stderr.count("stamped by") == len(days), result.stderr
    with Log.open(data) as log:
        for day in days:
            sealed = log.store.sealed_head(day)
            assert sealed is not None
            jws = tmp_path / f"{day}.jws"
            jws.write_bytes(heads.parse_document(sealed.doc).jws.encode("ascii"))
            (stamp,) = log.store.stamps(day)
            ok, out = verify(jws, stamp.token, tsa.ca)
            assert ok, out


def test_dev_tsa_keeps_its_ca_across_restarts(tmp_path: Path) -> None:
    folder = tmp_path / "data-tsa"
    with dev_tsa(folder) as first:
        ca = first.ca.read_bytes()
    with dev_tsa(folder) as second:
        assert second.ca == first.ca and second.ca.read_bytes() == ca
        assert (folder / "tsa.pem").is_file()

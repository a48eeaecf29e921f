"""A throwaway RFC 3161 Time-Stamp Authority on a free loopback port, for tests and by hand.

    pki = make_pki(tmp_path / "pki", kind="ec")
    with TestTsa(pki) as tsa:
        reply = urllib.request.urlopen(Request(tsa.url, data=query, headers=...))

Every reply is made by OpenSSL itself (`openssl ts -reply`, one process per request) from a
CA and a TSA certificate (extendedKeyUsage=critical,timeStamping) created by `make_pki` with
`openssl req` / `openssl x509`, in RSA 2048 or EC P-256. `TestTsa.mode` selects a fault:

    ok            200 application/timestamp-reply, the genuine reply to the query
    down          the connection is closed without an answer (for a refused connection use
                  `stop()` or `closed_port_url()`)
    hang          nothing is sent for `hang_seconds` (released at once by `stop()`)
    drip          headers, then the genuine reply one byte per `drip_interval` seconds
    garbage       200 application/timestamp-reply with random bytes
    http500       500 Internal Server Error
    rejection     200 with a TimeStampResp whose PKIStatusInfo status is 2 (rejection)
    other_digest  a genuinely signed token for another (random) digest
    other_nonce   a genuinely signed token for the same digest but another nonce
    other_ca      a genuine reply to the query, signed by a TSA of another, untrusted CA

It lives among the tests so their helpers (`tsakit`) import it like any module; the script
`tools/test_tsa.py` (for `tools/make_sample.py` and by hand) imports it from here. As a
script (serves until killed):

    python tools/test_tsa.py --port 0 --key ec [--mode ok] [--dir DIR]

Only 127.0.0.1 is used. Every subprocess is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
OPENSSL = os.environ.get("OPENSSL", "openssl")
CMD_TIMEOUT_S = 30.0
MODES = (
    "ok",
    "down",
    "hang",
    "drip",
    "garbage",
    "http500",
    "rejection",
    "other_digest",
    "other_nonce",
    "other_ca",
)
QUERY_TYPE = "application/timestamp-query"
REPLY_TYPE = "application/timestamp-reply"
# TimeStampResp ::= SEQUENCE { status PKIStatusInfo ::= SEQUENCE { status INTEGER 2 } }
REJECTION_REPLY = bytes.fromhex("30053003020102")
DIGEST_BY_LEN = {20: "sha1", 32: "sha256", 48: "sha384", 64: "sha512"}


class OpensslError(RuntimeError):
    pass


def openssl(*args: str | os.PathLike[str], timeout: float = CMD_TIMEOUT_S) -> str:
    """Run `openssl ARGS`, return its stdout; raise OpensslError with stderr on failure."""
    argv = [OPENSSL, *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise OpensslError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Pki:
    dir: Path
    kind: str
    ca_cert: Path
    ca_key: Path
    tsa_cert: Path
    tsa_key: Path
    config: Path


def _newkey(kind: str) -> list[str]:
    if kind == "rsa":
        return ["-newkey", "rsa:2048"]
    if kind == "ec":
        return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    raise ValueError(f"kind must be 'rsa' or 'ec', not {kind!r}")


def make_pki(
    dir: str | os.PathLike[str], kind: str = "rsa", name: str = "Test", days: int = 7
) -> Pki:
    """Create in DIR a root CA, a TSA certificate signed by it and an `openssl ts` config."""
    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    newkey = _newkey(kind)
    ca_cert, ca_key = d / "ca.pem", d / "ca.key"
    tsa_cert, tsa_key, tsa_csr = d / "tsa.pem", d / "tsa.key", d / "tsa.csr"
    openssl(
        "req", "-x509", *newkey, "-nodes", "-keyout", ca_key, "-out", ca_cert,
        "-subj", f"/O=capability-anchor tests/CN={name} {kind.upper()} Root CA",
        "-days", str(days), "-sha256",
        "-addext", "basicConstraints=critical,CA:true",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    openssl(
        "req", "-new", *newkey, "-nodes", "-keyout", tsa_key, "-out", tsa_csr,
        "-subj", f"/O=capability-anchor tests/CN={name} {kind.upper()} TSA",
    )  # fmt: skip
    ext = d / "tsa_ext.cnf"
    ext.write_text(
        "[v3_tsa]\n"
        "basicConstraints = critical,CA:false\n"
        "keyUsage = critical,digitalSignature\n"
        "extendedKeyUsage = critical,timeStamping\n"
        "subjectKeyIdentifier = hash\n"
        "authorityKeyIdentifier = keyid:always\n"
    )
    openssl(
        "x509", "-req", "-in", tsa_csr, "-CA", ca_cert, "-CAkey", ca_key,
        "-set_serial", f"0x{secrets.token_hex(8)}", "-days", str(days), "-sha256",
        "-extfile", ext, "-extensions", "v3_tsa", "-out", tsa_cert,
    )  # fmt: skip
    serial = d / "tsaserial"
    serial.write_text("01\n")
    config = d / "tsa.cnf"
    config.write_text(
        "[tsa]\n"
        "default_tsa = tsa_config1\n"
        "\n"
        "[tsa_config1]\n"
        f"serial = {serial}\n"
        "crypto_device = builtin\n"
        f"signer_cert = {tsa_cert}\n"
        f"certs = {ca_cert}\n"
        f"signer_key = {tsa_key}\n"
        "signer_digest = sha256\n"
        "default_policy = 1.2.3.4.1\n"
        "other_policies = 1.2.3.4.5\n"
        "digests = sha256, sha384, sha512\n"
        "accuracy = secs:1, millisecs:500, microsecs:100\n"
        "clock_precision_digits = 0\n"
        "ordering = yes\n"
        "tsa_name = yes\n"
        "ess_cert_id_chain = no\n"
        "ess_cert_id_alg = sha256\n"
    )
    return Pki(d, kind, ca_cert, ca_key, tsa_cert, tsa_key, config)


def load_pki(dir: str | os.PathLike[str], kind: str = "rsa") -> Pki | None:
    """The PKI `make_pki` left in DIR, or None when a file of it is missing: a TSA started
    again on the same DIR keeps its CA, so what it stamped before still verifies."""
    d = Path(dir)
    pki = Pki(d, kind, d / "ca.pem", d / "ca.key", d / "tsa.pem", d / "tsa.key", d / "tsa.cnf")
    files = (pki.ca_cert, pki.ca_key, pki.tsa_cert, pki.tsa_key, pki.config, d / "tsaserial")
    return pki if all(f.is_file() for f in files) else None


# --- a minimal DER reader, enough to take a TimeStampReq apart ---------------------------


def _tlv(buf: bytes, i: int) -> tuple[int, int, int]:
    """Return (tag, start of content, end of content) of the DER element at buf[i]."""
    tag = buf[i]
    n = buf[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(buf[i : i + k], "big")
        i += k
    if i + n > len(buf):
        raise ValueError("truncated DER")
    return tag, i, i + n


@dataclass(frozen=True)
class ParsedQuery:
    digest: bytes
    nonce: int | None
    cert_req: bool


def parse_query(der: bytes) -> ParsedQuery:
    """The hashed message, nonce and certReq of a DER TimeStampReq (RFC 3161 2.4.1)."""
    tag, start, end = _tlv(der, 0)
    if tag != 0x30:
        raise ValueError("TimeStampReq is not a SEQUENCE")
    _, _, i = _tlv(der, start)  # version
    tag, istart, i = _tlv(der, i)  # messageImprint
    if tag != 0x30:
        raise ValueError("messageImprint is not a SEQUENCE")
    _, _, j = _tlv(der, istart)  # hashAlgorithm
    _, dstart, dend = _tlv(der, j)
    digest = der[dstart:dend]
    nonce, cert_req = None, False
    while i < end:
        tag, cstart, cend = _tlv(der, i)
        if tag == 0x02:
            nonce = int.from_bytes(der[cstart:cend], "big", signed=True)
        elif tag == 0x01:
            cert_req = der[cstart:cend] != b"\x00"
        i = cend
    return ParsedQuery(digest, nonce, cert_req)


def closed_port_url() -> str:
    """A URL on a loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    return f"http://{HOST}:{port}/"


# --- the server -------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    timeout = 15  # a client that connects and sends nothing does not pin a thread forever

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        tsa = self.server.tsa
        mode = tsa.mode
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with tsa._lock:
            tsa.queries.append(body)
        if self.headers.get_content_type() != QUERY_TYPE:
            self._send(415, b"expected application/timestamp-query\n", "text/plain")
            return
        if mode == "down":
            self.close_connection = True
            return
        if mode == "hang":
            tsa._stopping.wait(tsa.hang_seconds)
            self.close_connection = True
            return
        if mode == "http500":
            self._send(500, b"internal error\n", "text/plain")
            return
        if mode == "garbage":
            self._send(200, secrets.token_bytes(512))
            return
        if mode == "rejection":
            self._send(200, REJECTION_REPLY)
            return
        try:
            reply = tsa.reply_for(body, mode)
        except (OpensslError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
            self._send(400, f"{e}\n".encode(), "text/plain")
            return
        if mode == "drip":
            self._drip(reply)
            return
        self._send(200, reply)

    def _send(self, status: int, body: bytes, ctype: str = REPLY_TYPE) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drip(self, reply: bytes) -> None:
        tsa = self.server.tsa
        self.send_response(200)
        self.send_header("Content-Type", REPLY_TYPE)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        try:
            self.wfile.flush()
            for b in reply:
                if tsa._stopping.wait(tsa.drip_interval):
                    break
                self.wfile.write(bytes([b]))
                self.wfile.flush()
        except OSError:  # the client gave up
            pass
        self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins every handler thread
    block_on_close = True
    tsa: TestTsa

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # a client hanging up is not an error of the TSA
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class TestTsa:
    """An `openssl ts -reply` TSA behind an HTTP server on 127.0.0.1, port 0."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        pki: Pki,
        *,
        other_pki: Pki | None = None,
        port: int = 0,
        mode: str = "ok",
        hang_seconds: float = 30.0,
        drip_interval: float = 0.5,
    ) -> None:
        self.pki = pki
        self._other_pki = other_pki
        self.mode = mode
        self.hang_seconds = hang_seconds
        self.drip_interval = drip_interval
        self.queries: list[bytes] = []
        self._lock = threading.Lock()
        self._openssl_lock = threading.Lock()  # the serial file is shared
        self._stopping = threading.Event()
        self._tmp = tempfile.TemporaryDirectory(prefix="test-tsa-")
        self._server = _Server((HOST, port), _Handler)
        self._server.tsa = self
        self.port: int = self._server.server_address[1]
        self.url = f"http://{HOST}:{self.port}/"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"test-tsa-{self.port}",
            daemon=True,
        )
        self._thread.start()
        self._stopped = False

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self._mode = mode

    @property
    def other_pki(self) -> Pki:
        """The untrusted PKI of mode `other_ca`, created on first use."""
        if self._other_pki is None:
            self._other_pki = make_pki(
                Path(self._tmp.name) / "other-pki", self.pki.kind, name="Untrusted"
            )
        return self._other_pki

    def stop(self) -> None:
        """Release hanging and dripping handlers, close the port, join every thread."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=CMD_TIMEOUT_S)
        self._tmp.cleanup()

    close = stop

    def __enter__(self) -> TestTsa:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- replies ---

    def reply(self, query: bytes, pki: Pki | None = None) -> bytes:
        """The DER TimeStampResp `openssl ts -reply` makes for QUERY with PKI's TSA."""
        pki = pki or self.pki
        fd, qname = tempfile.mkstemp(suffix=".tsq", dir=self._tmp.name)
        rname = qname[:-4] + ".tsr"
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(query)
            with self._openssl_lock:
                openssl("ts", "-reply", "-config", pki.config, "-queryfile", qname, "-out", rname)
            return Path(rname).read_bytes()
        finally:
            for name in (qname, rname):
                Path(name).unlink(missing_ok=True)

    def make_query(self, digest: bytes, *, cert_req: bool = True, nonce: bool = True) -> bytes:
        """A fresh TimeStampReq for DIGEST (with a random nonce) from `openssl ts -query`."""
        alg = DIGEST_BY_LEN[len(digest)]
        args = ["ts", "-query", "-digest", digest.hex(), f"-{alg}"]
        if cert_req:
            args.append("-cert")
        if not nonce:
            args.append("-no_nonce")
        fd, qname = tempfile.mkstemp(suffix=".tsq", dir=self._tmp.name)
        os.close(fd)
        try:
            openssl(*args, "-out", qname)
            return Path(qname).read_bytes()
        finally:
            Path(qname).unlink(missing_ok=True)

    def reply_for(self, query: bytes, mode: str) -> bytes:
        if mode == "other_ca":
            return self.reply(query, self.other_pki)
        if mode == "other_digest":
            parsed = parse_query(query)
            other = secrets.token_bytes(len(parsed.digest))
            return self.reply(self.make_query(other, cert_req=parsed.cert_req))
        if mode == "other_nonce":
            parsed = parse_query(query)
            while True:
                fresh = self.make_query(parsed.digest, cert_req=parsed.cert_req)
                if parse_query(fresh).nonce != parsed.nonce:
                    return self.reply(fresh)
        return self.reply(query)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--key", choices=("rsa", "ec"), default="rsa")
    p.add_argument("--mode", choices=MODES, default="ok")
    p.add_argument("--dir", help="where to create the PKI (default: a temporary directory)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="test-tsa-pki-") as tmp:
        pki = make_pki(Path(args.dir or tmp), args.key)
        with TestTsa(pki, port=args.port, mode=args.mode) as tsa:
            print(f"url: {tsa.url}", flush=True)
            print(f"ca: {pki.ca_cert}", flush=True)
            if args.dir is None:
                print("(the PKI is deleted on exit; pass --dir to keep it)", flush=True)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

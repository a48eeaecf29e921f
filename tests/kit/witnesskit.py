"""A C2SP tlog-witness for tests, written from the texts (c2sp.org/tlog-witness,
signed-note, tlog-checkpoint, tlog-cosignature; RFC 9162 §2.1.4.2 for consistency), not
from the product's code: its own Ed25519 (`cryptography`), its own note, vkey and
checkpoint parsing, its own consistency check. It runs a real HTTP server on 127.0.0.1.

    with TestWitness("witness.test/w1", log_vkey) as w:
        policy = f"witness w1 {w.vkey} {w.url}\\nquorum w1\\n"
        w.mode = "hang"          # a fault mode, see MODES
        w.requests               # every add-checkpoint body received, in order

Without a fault it behaves as the spec says: 404 for an unknown origin, 403 when no log
signature verifies, 400 when old > size, 409 `text/x.tlog.size` when old is not the size it
last cosigned (or when old = size with another root), 422 when the proof fails, else it
records the checkpoint and answers 200 with one cosignature/v1 line.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .c2spkit import third_party_venv
from .serverkit import CLI, Server, free_port, start

EM = "\u2014"
MODES = (
    None,  # behave as the spec says
    "hang",  # read the request, never answer (until the witness is closed)
    "409-smaller",  # a 409 naming `conflict_size` (set it below the log's size)
    "409-larger",  # a 409 naming `conflict_size` (set it above the log's size)
    "422",
    "403",
    "404",
    "500",
    "wrong-key",  # a 200 whose cosignature is by another key under the witness's name
    "other-checkpoint",  # a 200 whose cosignature is by the right key over another checkpoint
    "garbage",  # a 200 whose body is not signature lines
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(name: str, key_type: int, public: bytes) -> bytes:
    """signed-note: SHA-256(name || 0x0A || type || public key), first 4 bytes."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public).digest()[:4]


def parse_vkey(vkey: str) -> tuple[str, bytes, bytes]:
    """`<name>+<hex key ID>+<base64(type || key)>` -> (name, key ID, 32-byte Ed25519 key)."""
    name, hex_id, blob = vkey.split("+", 2)  # base64 may hold "+"; a name never does
    raw = base64.b64decode(blob, validate=True)
    if raw[0] != 0x01 or len(raw) != 33 or key_id(name, 0x01, raw[1:]).hex() != hex_id:
        raise ValueError(f"not an Ed25519 note vkey: {vkey}")
    return name, bytes.fromhex(hex_id), raw[1:]


def hash_children(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def consistent(old: int, new: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> bool:
    """RFC 9162 §2.1.4.2, step by step as the RFC words it."""
    if old == new:
        return not proof and old_root == new_root
    if old == 0 or old > new:
        return False
    if old & (old - 1) == 0:  # old is an exact power of 2: prepend first_hash
        proof = [old_root, *proof]
    if not proof:
        return False
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = hash_children(c, fr)
            sr = hash_children(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = hash_children(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0


@dataclass
class Checkpoint:
    text: str  # the note text, final newline included
    origin: str
    size: int
    root: bytes
    signatures: list[tuple[str, bytes, bytes]]  # (key name, key ID, signature)


def parse_checkpoint_note(note: str) -> Checkpoint:
    split = note.rindex("\n\n")
    text, block = note[: split + 1], note[split + 2 :]
    origin, size, root = text.split("\n")[:3]
    signatures = []
    for line in block.split("\n")[:-1]:
        dash, name, blob = line.split(" ")
        if dash != EM:
            raise ValueError("a signature line starts with an em dash")
        raw = base64.b64decode(blob, validate=True)
        signatures.append((name, raw[:4], raw[4:]))
    return Checkpoint(text, origin, int(size), base64.b64decode(root, validate=True), signatures)


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


@dataclass
class TestWitness:
    """One witness for one log (`log_vkey`), with its own key."""

    name: str
    log_vkey: str
    mode: str | None = None
    conflict_size: int = 0
    delay: float = 0.0  # seconds between recording a checkpoint and answering
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    state: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # origin -> (size, root)
    requests: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.time() of each request
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: http.server.ThreadingHTTPServer | None = None
    _url: str = ""

    __test__ = False  # not a pytest class

    @property
    def vkey(self) -> str:
        """The witness's cosignature vkey (type 0x04), as a tlog-policy names it."""
        public = raw_public(self.key.public_key())
        blob = b64(bytes([0x04]) + public)
        return f"{self.name}+{key_id(self.name, 0x04, public).hex()}+{blob}"

    @property
    def url(self) -> str:
        """Its submission prefix (still the same after `down`)."""
        if not self._url:
            raise RuntimeError("the witness never served")
        return self._url

    def cosign(self, text: str, at: int, key: Ed25519PrivateKey | None = None) -> str:
        """tlog-cosignature: `cosignature/v1\\ntime <t>\\n` + the checkpoint text, signed;
        the line carries key ID (type 0x04) || u64 timestamp || signature."""
        key = key or self.key
        message = f"cosignature/v1\ntime {at}\n".encode() + text.encode()
        public = raw_public(key.public_key())
        blob = key_id(self.name, 0x04, public) + at.to_bytes(8, "big") + key.sign(message)
        return f"{EM} {self.name} {b64(blob)}\n"

    # --- the protocol ---------------------------------------------------------------------

    def answer(self, body: bytes) -> Reply:
        with self._lock:  # tlog-witness: check and update atomically
            self.requests.append(body)
            self.times.append(time.time())
            fault = self._fault()
            if fault is not None:
                return fault
            try:
                old, proof, note = self._parse(body)
            except (ValueError, IndexError, UnicodeDecodeError) as exc:
                return Reply(400, f"malformed request: {exc}\n".encode())
            return self._check(old, proof, note)

    def _fault(self) -> Reply | None:
        if self.mode in ("403", "404", "422", "500"):
            return Reply(int(self.mode), b"fault\n")
        if self.mode in ("409-smaller", "409-larger"):
            return Reply(409, f"{self.conflict_size}\n".encode(), "text/x.tlog.size")
        return None

    @staticmethod
    def _parse(body: bytes) -> tuple[int, list[bytes], Checkpoint]:
        text = body.decode("utf-8")
        first, rest = text.split("\n", 1)
        word, old = first.split(" ")
        if word != "old" or (old != "0" and old.startswith("0")):
            raise ValueError("no old size line")
        proof: list[bytes] = []
        while not rest.startswith("\n"):
            line, rest = rest.split("\n", 1)
            proof.append(base64.b64decode(line, validate=True))
        if len(proof) > 63:
            raise ValueError("more than 63 proof lines")
        return int(old), proof, parse_checkpoint_note(rest[1:])

    def _check(self, old: int, proof: list[bytes], cp: Checkpoint) -> Reply:
        try:
            name, kid, public = parse_vkey(self.log_vkey)
        except ValueError:
            return Reply(500, b"bad log vkey\n")
        if cp.origin != name:
            return Reply(404, b"unknown origin\n")
        if not any(self._log_signed(cp, kid, public, s) for s in cp.signatures):
            return Reply(403, b"no trusted log signature\n")
        if old > cp.size:
            return Reply(400, b"old > size\n")
        size, root = self.state.get(cp.origin, (0, b""))
        if old != size:
            return Reply(409, f"{size}\n".encode(), "text/x.tlog.size")
        if old == cp.size and root != cp.root:
            return Reply(409, f"{size}\n".encode(), "text/x.tlog.size")
        if old == 0 and proof:
            return Reply(422, b"a proof from 0\n")
        if old > 0 and not consistent(old, cp.size, root, cp.root, proof):
            return Reply(422, b"inconsistent\n")
        self.state[cp.origin] = (cp.size, cp.root)
        return Reply(200, self._cosignature(cp).encode(), "text/plain; charset=utf-8")

    @staticmethod
    def _log_signed(cp: Checkpoint, kid: bytes, public: bytes, sig: tuple[str, bytes, bytes]):
        if (sig[0], sig[1]) != (cp.origin, kid):
            return False
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(sig[2], cp.text.encode())
        except InvalidSignature:
            return False
        return True

    def _cosignature(self, cp: Checkpoint) -> str:
        now = int(time.time())
        if self.mode == "wrong-key":
            return self.cosign(cp.text, now, Ed25519PrivateKey.generate())
        if self.mode == "other-checkpoint":
            lines = cp.text.split("\n")
            other = f"{lines[0]}\n{cp.size + 1}\n{lines[2]}\n"
            return self.cosign(other, now)
        if self.mode == "garbage":
            return "this is not a signature line\n"
        return self.cosign(cp.text, now)

    # --- the server -----------------------------------------------------------------------

    def start(self) -> TestWitness:
        witness = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if witness.mode == "hang":  # the request is read, then nothing
                    witness.requests.append(body)
                    witness.times.append(time.time())
                    witness._release.wait(120)
                    return
                if self.path != "/add-checkpoint":
                    reply = Reply(404, b"no such path\n")
                else:
                    reply = witness.answer(body)
                if witness.delay:
                    witness._release.wait(witness.delay)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self._url = f"http://{host!s}:{port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def down(self) -> str:
        """Stop listening (connections are refused from now on); returns the old URL."""
        url = self.url
        self.close()
        return url

    def close(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> TestWitness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- our witness, `capability-anchor witness serve`, as a process -----------------------------


def witness_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`capability-anchor witness ARGS --data DATA`, its output captured."""
    argv = [str(CLI), "witness", *args, "--data", str(data)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@dataclass
class Running:
    server: Server
    data: Path
    vkey: str
    name: str

    def post(self, client: httpx.Client, payload: bytes) -> httpx.Response:
        return client.post(f"{self.server.url}/add-checkpoint", content=payload)


def start_witness(
    tmp: Path, *logs: tuple[str, str], rate_limit: int = 0, extra: Sequence[str] = ()
) -> Running:
    """`witness init` in TMP/witness, `add-log` for each (origin, vkey), `witness serve` on a
    free loopback port (stop it with `.server.kill()` or `.server.stop()`)."""
    data = tmp / "witness"
    out = witness_cli(data, "init", "--name", "witness.test/ours")
    assert out.returncode == 0, out.stderr
    vkey = json.loads(out.stdout)["vkey"]
    for origin, log_vkey in logs:
        added = witness_cli(data, "add-log", "--origin", origin, "--vkey", log_vkey)
        assert added.returncode == 0, added.stderr
    port = free_port()
    argv = [str(CLI), "witness", "serve", "--data", str(data), "--port", str(port)]
    argv += ["--rate-limit", str(rate_limit), *extra]
    server = start(data, port=port, argv=argv, logs=tmp)
    return Running(server, data, vkey, "witness.test/ours")


# --- many witnesses that hang ----------------------------------------------------------------


class HangingServer:
    """One loopback TCP server that accepts every connection, reads what comes and never
    answers: the stand-in for any number of dead witnesses (`urls(n)`: a submission prefix
    each, all on this server). It counts connections, and the most open at once (a client
    that gives up closes its connection, which the server sees)."""

    __test__ = False

    def __init__(self) -> None:
        import selectors

        self._selector = selectors.DefaultSelector()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1024)
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self.open = 0
        self.most_open = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def urls(self, n: int) -> list[str]:
        return [f"http://127.0.0.1:{self.port}/hang{i}" for i in range(n)]

    def _run(self) -> None:
        import selectors

        while not self._stop.is_set():
            for key, _ in self._selector.select(0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    with contextlib.suppress(BlockingIOError):
                        conn, _ = sock.accept()
                        conn.setblocking(False)
                        self._selector.register(conn, selectors.EVENT_READ)
                        self.accepted += 1
                        self.open += 1
                        self.most_open = max(self.most_open, self.open)
                    continue
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:  # the client gave up
                    self._selector.unregister(sock)
                    sock.close()
                    self.open -= 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def __enter__(self) -> HangingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cosignature_vkey(name: str) -> str:
    """A fresh witness cosignature vkey (type 0x04) under NAME (a witness that never signs)."""
    public = raw_public(Ed25519PrivateKey.generate().public_key())
    return f"{name}+{key_id(name, 0x04, public).hex()}+{b64(bytes([0x04]) + public)}"


# --- aics-witness, the real third-party witness ---------------------------------------------

AICS_REQUIREMENTS = ("aics-witness", "cryptography>=50.0.2")


def ensure_aics_witness() -> Path:
    """`<repo>/.venv-witness/bin/aics-witness`, installed once (`c2spkit.third_party_venv`).
    If it cannot be installed the test fails with pip's error."""
    python = third_party_venv(".venv-witness", AICS_REQUIREMENTS, "aics_witness")
    return python.parent / "aics-witness"


def _run(command: list[str], what: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
            pytrace=False,
        )
    return done.stdout


@dataclass
class AicsWitness:
    """aics-witness as a loopback process: `init`, `add-log` with our origin and vkey,
    `serve`. `vkey` is what `init` printed, `url` its submission (and monitoring) prefix."""

    folder: Path
    origin: str
    log_vkey: str
    name: str = "witness.test/aics"
    vkey: str = ""
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    _log_file: object = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> AicsWitness:
        exe = str(ensure_aics_witness())
        config = str(self.folder / "witness.json")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        listen = f"127.0.0.1:{self.port}"
        out = _run(
            [exe, "init", "--config", config, "--name", self.name, "--listen", listen],
            "aics-witness init",
        )
        self.vkey = out.strip().splitlines()[-1]
        _run(
            [exe, "add-log", "--config", config, "--origin", self.origin, "--vkey", self.log_vkey],
            "aics-witness add-log",
        )
        log_file = open(self.folder / "serve.log", "wb")  # noqa: SIM115 (closed by close())
        self._log_file = log_file
        self.process = subprocess.Popen(
            [exe, "serve", "--config", config], stdout=log_file, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"aics-witness exited: {self.log()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"aics-witness did not listen: {self.log()}")

    def log(self) -> str:
        return (self.folder / "serve.log").read_text(errors="replace")

    def add_vkey(self, vkey: str) -> None:
        """The log rotated: `aics-witness add-log` with the new vkey adds it to the log's
        keys (aics-witness keeps the old ones), and SIGHUP makes the running witness reload."""
        import signal

        config = str(self.folder / "witness.json")
        exe = str(ensure_aics_witness())
        out = _run(
            [exe, "add-log", "--config", config, "--origin", self.origin, "--vkey", vkey],
            "aics-witness add-log (another vkey)",
        )
        assert "added vkey" in out, out
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)

    def monitored(self) -> bytes:
        """GET <prefix>/<sha256(origin) hex>/checkpoint: what it last cosigned of our log."""
        import httpx

        digest = hashlib.sha256(self.origin.encode()).hexdigest()
        answer = httpx.get(f"{self.url}/{digest}/checkpoint", timeout=5)
        answer.raise_for_status()
        return answer.content

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None

    def __enter__(self) -> AicsWitness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

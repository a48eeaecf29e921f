"""`/metrics` (issue 21 item 5) with real tools: Debian's `promtool check metrics` on the
exposition of a real `serve` with body workers, a real Prometheus (started here, on
loopback, in a temp dir) scraping the ASGI form with 2 uvicorn workers through its
`authorization` config and queried through its HTTP API, `promtool check rules` on the
shipped docs/alerts.yml, and the store's gauges and token rules through a real app."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from capability_anchor.api.app import create_app
from capability_anchor.api.settings import Settings
from capability_anchor.log import Log, gauges
from capability_anchor.metrics import service as metrics
from capability_anchor.store import CosignatureRow
from tests.kit.apikit import ISS, build_history
from tests.kit.obskit import observation
from tests.kit.serverkit import CLI, HOST, free_port, serving, start, uvicorn_argv
from tests.kit.systools import ROOT, ensure_tool
from tests.kit.witnesskit import TestWitness

PROMTOOL = Path("/usr/bin/promtool")
PROMETHEUS = Path("/usr/bin/prometheus")
ALERTS = ROOT / "docs" / "alerts.yml"
TOKEN = "metrics-token-for-the-scraper-0123456789"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}
# Every metric docs/how-to/monitor.md lists, by the name of its family (histograms and
# counters by theirs).
REQUIRED = {
    "capability_anchor_http_requests",
    "capability_anchor_http_request_duration_seconds",
    "capability_anchor_records_appended",
    "capability_anchor_records_duplicate",
    "capability_anchor_writes_rejected",
    "capability_anchor_batch_size_records",
    "capability_anchor_commit_batches",
    "capability_anchor_day_tree_size",
    "capability_anchor_newest_head_age_seconds",
    "capability_anchor_newest_checkpoint_age_seconds",
    "capability_anchor_quorum_checkpoint_age_seconds",
    "capability_anchor_store_busy",
    "capability_anchor_clock_disagrees",
    "capability_anchor_store_lock_wait_seconds",
    "capability_anchor_store_lock_hold_seconds",
}


def promtool() -> Path:
    return ensure_tool(PROMTOOL, "prometheus", "promtool", timeout=900)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(text: str, sample: str, **labels: str) -> float:
    """The one sample named `sample` with `labels` (summed over any other label)."""
    total, found = 0.0, False
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                total, found = total + s.value, True
    assert found, f"no sample {sample} {labels}"
    return total


def post_batches(url: str, token: str, batches: list[list[dict[str, Any]]]) -> None:
    """Each batch in its own connection, several at once (so every worker takes some)."""

    def post(batch: list[dict[str, Any]]) -> None:
        with httpx.Client(timeout=60) as client:
            r = client.post(
                f"{url}/records",
                json={"records": batch},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 200, r.text

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(post, batches))


def a_log(data: Path) -> None:
    Log.init(data, iss=ISS).close()


# --- promtool check metrics on a real serve ---------------------------------------------------


def test_promtool_check_metrics_passes_on_a_real_serve_with_body_workers(tmp_path: Path) -> None:
    tool = promtool()
    data = tmp_path / "data"
    a_log(data)
    with serving(data, "--body-workers", "2", "--metrics-token", TOKEN) as server:
        batches = [[observation(i * 10 + j, "m") for j in range(i + 1)] for i in range(6)]
        post_batches(server.url, server.token(), batches)
        # A duplicate and a refusal, so those series have samples too.
        post_batches(server.url, server.token(), [[observation(0, "m")]])
        with server.client() as client:
            refused = client.post(
                "/records", json={"records": [{"v": "0.2"}]}, headers=server.writer_headers()
            )
            assert refused.status_code == 400
            assert client.post("/checkpoint", headers=server.writer_headers()).status_code == 200
            r = client.get("/metrics", headers=SCRAPE)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == metrics.CONTENT_TYPE
    checked = subprocess.run(
        [str(tool), "check", "metrics"], input=r.content, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = families(r.text)
    assert set(found) >= REQUIRED, REQUIRED - set(found)
    posted = sum(len(b) for b in batches)
    # Appended in the body workers, summed by the scrape from their files.
    assert value(r.text, "capability_anchor_records_appended_total") == posted
    assert value(r.text, "capability_anchor_records_duplicate_total") == 1
    assert value(r.text, "capability_anchor_writes_rejected_total", error="invalid_record") == 1
    assert value(r.text, "capability_anchor_batch_size_records_count") == len(batches) + 1
    assert value(r.text, "capability_anchor_day_tree_size") == posted
    # Route templates, never raw paths.
    routes = {s.labels["route"] for s in found["capability_anchor_http_requests"].samples}
    # (A scrape counts once answered: the first one is in the next.)
    assert {"/records", "/checkpoint"} <= routes


def test_a_scan_of_raw_paths_adds_no_label_values(tmp_path: Path) -> None:
    """Attack: 200 distinct made-up paths (and days) must not become 200 series."""
    h = build_history(tmp_path / "data")
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app) as client:
        for i in range(100):
            client.get(f"/no/such/path/{i}")
            client.get(f"/roots/2020-01-{(i % 28) + 1:02d}")
        text = client.get("/metrics").text
    routes = {
        s.labels["route"]
        for s in families(text)["capability_anchor_http_requests"].samples
        if "route" in s.labels
    }
    assert not any(r.startswith("/no/") or "2020" in r for r in routes), routes
    assert {"(unrouted)", "/roots/{day}"} <= routes


# --- the token, the rate limit ------------------------------------------------------------------


def test_metrics_token_refuses_a_scrape_without_or_with_another_bearer(tmp_path: Path) -> None:
    data = tmp_path / "data"
    a_log(data)
    with serving(data, "--metrics-token", TOKEN) as server, server.client() as client:
        for headers in ({}, {"Authorization": "Bearer guess"}, server.writer_headers()):
            r = client.get("/metrics", headers=headers)
            assert r.status_code == 401, headers
            doc = r.json()
            assert set(doc) == {"v", "error", "note"} and doc["error"] == "unauthorized"
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert client.get("/metrics", headers=SCRAPE).status_code == 200
        # The rest of the service does not take the metrics token for the writer's.
        assert client.post("/checkpoint", headers=SCRAPE).status_code == 401


def test_an_empty_metrics_token_is_refused_before_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    a_log(data)
    port = free_port()
    out = subprocess.run(
        [str(CLI), "serve", "--data", str(data), "--port", str(port), "--metrics-token", ""],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "metrics token" in out.stderr


def test_a_scraper_over_the_rate_limit_is_never_refused(tmp_path: Path) -> None:
    """Attack on the scraper: the per-address limit that answers 429 to public reads never
    takes /metrics away (a Prometheus behind one address scrapes every target there)."""
    data = tmp_path / "data"
    a_log(data)
    with serving(data, "--rate-limit", "1") as server, server.client() as client:
        statuses = [client.get("/metrics").status_code for _ in range(20)]
        limited = [client.get("/keys").status_code for _ in range(5)]
    assert statuses == [200] * 20
    assert 429 in limited


# --- the store's gauges and the seams -------------------------------------------------------------


@pytest.fixture
def state_sources() -> Iterator[None]:
    # Before too: an app earlier in this process (its background work) may have set one.
    _clear_states()
    yield
    _clear_states()


def _clear_states() -> None:
    metrics._sources.clear()
    metrics._drop(*metrics._set.values())
    metrics._set.clear()


def test_scrape_time_gauges_read_the_store(tmp_path: Path, state_sources: None) -> None:
    h = build_history(tmp_path / "data")
    with Log.open(h.data, background_checkpoints=False) as log:
        newest = log.store.newest_published()
        assert newest is not None
        with log.store.write():
            # A policy whose quorum no stored cosignature meets.
            vkey = TestWitness("example.com/w", "").vkey
            log.store.set_policy(f"witness w {vkey}\nquorum w\n".encode(), 0)
    metrics.register_state("behind_published", lambda log: True)
    metrics.register_state("witnessing_problem", lambda log: None)
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app) as client:
        before = h.clock()
        text = client.get("/metrics").text
        after = h.clock()
    # The newest head is the newest checkpoint's too (each head is checkpointed).
    for name in ("newest_head_age_seconds", "newest_checkpoint_age_seconds"):
        age = value(text, f"capability_anchor_{name}")
        assert before - newest.iat <= age <= after - newest.iat, name
    assert value(text, "capability_anchor_quorum_checkpoint_age_seconds") == math.inf
    # Only today is open: the two earlier days are sealed.
    sizes = families(text)["capability_anchor_day_tree_size"].samples
    assert {s.labels["day"]: s.value for s in sizes} == {h.today: len(h.records[h.today])}
    assert value(text, "capability_anchor_behind_published") == 1
    assert "capability_anchor_witnessing_problem" not in families(text)


def test_a_state_gauge_of_another_name_is_refused(state_sources: None) -> None:
    with pytest.raises(ValueError, match="no state gauge"):
        metrics.register_state("anything", lambda log: 1)
    with pytest.raises(ValueError, match="no state gauge"):
        metrics.set_state("anything", 1)


def test_a_state_set_by_the_process_holding_it_is_scraped(
    tmp_path: Path, state_sources: None
) -> None:
    h = build_history(tmp_path / "data")
    metrics.set_state("witnessing_problem", 1)
    with pytest.raises(ValueError, match="already set"):
        metrics.register_state("witnessing_problem", lambda log: 0)
    app = create_app(Settings(data_dir=h.data, background=False, rate_limit=0, clock=h.clock))
    with TestClient(app) as client:
        text = client.get("/metrics").text
    assert value(text, "capability_anchor_witnessing_problem") == 1
    # The app feeds behind_published itself, from the data dir's state file: not behind.
    assert value(text, "capability_anchor_behind_published") == 0


# --- a real Prometheus, 2 uvicorn workers ---------------------------------------------------


def _appended_by_pid(folder: Path) -> dict[int, float]:
    from prometheus_client.mmap_dict import MmapedDict

    out: dict[int, float] = {}
    for path in folder.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        for key, count, *_ in MmapedDict.read_all_values_from_file(str(path)):
            if json.loads(key)[0] == "capability_anchor_records_appended":
                out[pid] = out.get(pid, 0.0) + count
    return out


def _metrics_folder(supervisor: int) -> Path:
    base = Path(metrics._base())
    found = [p for p in base.iterdir() if p.name.startswith(f"{supervisor}-")]
    assert len(found) == 1, found
    return found[0]


def _query(port: int, expr: str) -> float | None:
    r = httpx.get(f"http://{HOST}:{port}/api/v1/query", params={"query": expr}, timeout=10)
    result = r.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def _prometheus(tmp_path: Path, target_port: int) -> tuple[subprocess.Popen[bytes], int]:
    tool = ensure_tool(PROMETHEUS, "prometheus", "prometheus", timeout=900)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: capability-anchor\n"
        "    authorization:\n"
        f"      credentials: {TOKEN}\n"
        "    static_configs:\n"
        f"      - targets: ['{HOST}:{target_port}']\n"
    )
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 (the process keeps it)
    proc = subprocess.Popen(
        [
            str(tool),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={HOST}:{port}",
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    return proc, port


def _until(check: Any, timeout: float) -> Any:
    """`check()` until it is truthy or `timeout` passes (then its last answer): a wait for
    processes to be ready, never a timed assertion."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            return answer
        time.sleep(0.25)


def test_a_real_prometheus_counts_every_record_posted_across_two_uvicorn_workers(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    a_log(data)
    port = free_port()
    env = {
        "CAPABILITY_ANCHOR_DATA": str(data),
        "CAPABILITY_ANCHOR_METRICS_TOKEN": TOKEN,
        "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": "1",
    }
    server = start(data, port=port, argv=uvicorn_argv(port, 2), env=env)
    prom: subprocess.Popen[bytes] | None = None
    try:
        folder = _metrics_folder(server.pid)
        posted, n = 0, 0
        # Batches until both workers appended some: each uvicorn worker has one body worker
        # (the default), which appends and counts in files of its own, so two pids with
        # appends are two uvicorn workers' (the scrape sums them all).
        for _ in range(40):
            batches = [[observation(n + i * 3 + j, "p") for j in range(3)] for i in range(8)]
            n += 24
            post_batches(server.url, server.token(), batches)
            posted += 24
            if len(_appended_by_pid(folder)) >= 2 and len(_workers(server.pid)) == 2:
                break
        by_pid = _appended_by_pid(folder)
        assert sum(by_pid.values()) == posted
        assert len(by_pid) >= 2, by_pid
        prom, prom_port = _prometheus(tmp_path, port)
        expr = "sum(capability_anchor_records_appended_total)"
        got = _until(lambda: _ready_value(prom_port, expr, posted), 120)
        assert got == posted, (tmp_path / "prometheus.log").read_text()[-3000:]
        up = _query(prom_port, 'up{job="capability-anchor"}')
        assert up == 1
        # What Prometheus scraped passes promtool too (the ASGI form's exposition).
        with httpx.Client(base_url=server.url, timeout=30) as client:
            exposition = client.get("/metrics", headers=SCRAPE).content
        checked = subprocess.run(
            [str(promtool()), "check", "metrics"], input=exposition, capture_output=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(30)
        server.stop()


def _ready_value(port: int, expr: str, want: float) -> float | None:
    try:
        got = _query(port, expr)
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return got if got == want else None


def _workers(supervisor: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(supervisor)], capture_output=True, text=True, check=False
    )
    return [int(p) for p in out.stdout.split()]


# --- the witness server, the alert rules ----------------------------------------------------


def test_witness_serve_exposes_metrics_behind_its_token(tmp_path: Path) -> None:
    tool = promtool()
    wdata = tmp_path / "witness"
    subprocess.run(
        [str(CLI), "witness", "init", "--data", str(wdata), "--name", "example.com/w"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    argv = [
        str(CLI), "witness", "serve", "--data", str(wdata), "--host", HOST,
        "--port", str(port), "--metrics-token", TOKEN,
    ]  # fmt: skip
    server = start(wdata, port=port, argv=argv)
    try:
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=30) as client:
            client.post("/add-checkpoint", content=b"not a request")
            assert client.get("/metrics").status_code == 401
            r = client.get("/metrics", headers=SCRAPE)
    finally:
        server.stop()
    assert r.status_code == 200
    checked = subprocess.run(
        [str(tool), "check", "metrics"], input=r.content, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert value(r.text, "capability_anchor_http_requests_total", route="/add-checkpoint") == 1


def test_the_shipped_alert_rules_pass_promtool_check_rules() -> None:
    tool = promtool()
    out = subprocess.run(
        [str(tool), "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = ALERTS.read_text()
    for metric in (
        "capability_anchor_newest_checkpoint_age_seconds",
        "capability_anchor_quorum_checkpoint_age_seconds",
        "capability_anchor_witness_requests_total",
        "capability_anchor_writes_rejected_total",
        "capability_anchor_behind_published",
        "capability_anchor_clock_disagrees",
        "capability_anchor_store_busy_total",
    ):
        assert metric in text, metric


def test_a_dead_workers_live_gauges_leave_the_sums(tmp_path: Path) -> None:
    """kill -9 of a process of the service: its counters stay in the sums, its live gauges
    are dropped (`mark_process_dead` at the next scrape)."""
    data = tmp_path / "data"
    a_log(data)
    with serving(data, "--body-workers", "1") as server:
        post_batches(server.url, server.token(), [[observation(i, "k")] for i in range(3)])
        folder = _metrics_folder(server.pid)
        workers = [p for p in _appended_by_pid(folder) if p != server.pid]
        assert workers, "the body worker appended nothing"
        os.kill(workers[0], signal.SIGKILL)
        _until(lambda: not Path(f"/proc/{workers[0]}").exists(), 10)
        with server.client() as client:
            text = client.get("/metrics").text
        assert value(text, "capability_anchor_records_appended_total") == 3
        assert not list(folder.glob(f"gauge_live*_{workers[0]}.db"))


def test_witness_exchanges_are_counted_by_witness_and_outcome(tmp_path: Path) -> None:
    """A real serve submitting to an honest witness and to one nobody listens for: each
    exchange by witness and outcome, with its latency, and the quorum checkpoint's age
    becomes finite once the honest one (the quorum) cosigned."""
    data = tmp_path / "data"
    a_log(data)
    with Log.open(data, background_checkpoints=False) as log:
        vkey = log.read.history.vkey()
    with TestWitness("witness.test/w1", vkey) as good:
        gone = TestWitness("witness.test/w2", vkey)  # never started: its port is closed
        policy = (
            f"witness w1 {good.vkey} {good.url}\n"
            f"witness w2 {gone.vkey} http://{HOST}:{free_port()}\n"
            "quorum w1\n"
        )
        with Log.open(data, background_checkpoints=False) as log, log.store.write():
            log.store.set_policy(policy.encode(), int(time.time()))
        args = ("--checkpoint-interval", "1", "--rate-limit", "0")
        with serving(data, *args) as server, server.client() as client:
            post_batches(server.url, server.token(), [[observation(0, "w")]])

            def scraped() -> str | None:
                text = client.get("/metrics").text
                want = {("w1", "cosigned"), ("w2", "failed")}
                seen = {
                    (s.labels["witness"], s.labels["outcome"])
                    for f in text_string_to_metric_families(text)
                    if f.name == "capability_anchor_witness_requests"
                    for s in f.samples
                    if s.name.endswith("_total")
                }
                # The exchange is counted when w1 answers, its cosignature stored just
                # after: a scrape in between sees the count and no quorum checkpoint yet.
                ages = [
                    s.value
                    for f in text_string_to_metric_families(text)
                    for s in f.samples
                    if s.name == "capability_anchor_quorum_checkpoint_age_seconds"
                ]
                return text if want <= seen and ages and ages[0] < math.inf else None

            text = _until(scraped, 60)
    assert text, "no cosignature by w1, no failure of w2 counted, or no quorum checkpoint"
    assert value(text, "capability_anchor_witness_request_duration_seconds_count", witness="w1")
    assert value(text, "capability_anchor_quorum_checkpoint_age_seconds") < math.inf


def test_the_quorum_search_is_bounded_and_says_at_least_how_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack on the scrape's cost: a quorum witness down for a month leaves thousands of
    checkpoints that do not meet the quorum. The scrape reads at most QUORUM_SEARCH of them
    and reports the oldest one's age (the quorum checkpoint is older still)."""
    h = build_history(tmp_path / "data")
    with Log.open(h.data, background_checkpoints=False) as log:
        with log.store.read():
            newest = log.store.checkpoint_size()
            sizes = [newest - 1, newest]
            iat = {s: log.store.history_heads(s - 1, s)[0].iat for s in sizes}
        with log.store.write():
            vkey = TestWitness("example.com/w", "").vkey
            log.store.set_policy(f"witness w {vkey}\nquorum w\n".encode(), 0)
            for size in sizes:  # lines of a witness the policy does not list
                line = f"\u2014 other.example/x AAAA{size}"
                log.store.insert_cosignature(CosignatureRow("x", b"\0" * 4, size, 0, line), 0)

    def quorum_age() -> float:
        app = create_app(Settings(data_dir=h.data, background=False, clock=h.clock))
        with TestClient(app) as client:
            return value(
                client.get("/metrics").text, "capability_anchor_quorum_checkpoint_age_seconds"
            )

    assert quorum_age() == math.inf  # both looked at, none meets it
    monkeypatch.setattr(gauges, "QUORUM_SEARCH", 1)
    before = h.clock()
    age = quorum_age()
    # Only the newest was looked at: the answer is a lower bound, its age.
    assert before - iat[newest] <= age <= h.clock() - iat[newest]


# --- the multiprocess folder --------------------------------------------------------------------

_PREPARE = (
    "import sys\n"
    "from capability_anchor.metrics import service as metrics\n"
    "from capability_anchor.errors import UsageError\n"
    "try:\n"
    "    print(metrics.prepare(own=True))\n"
    "except UsageError as exc:\n"
    "    print(exc, file=sys.stderr); sys.exit(2)\n"
)


def _prepare(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    return subprocess.run(
        [sys.executable, "-c", _PREPARE],
        env={**environ, "TMPDIR": str(tmp), **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_each_start_counts_in_a_new_private_folder_and_old_ones_are_swept(tmp_path: Path) -> None:
    base = tmp_path / f"capability-anchor-metrics-{os.getuid()}"
    first = _prepare(tmp_path)
    assert first.returncode == 0, first.stderr
    stale = Path(first.stdout.strip())
    assert stale.parent == base and stale.is_dir()
    assert (base.stat().st_mode & 0o777, stale.stat().st_mode & 0o777) == (0o700, 0o700)
    (stale / "counter_1.db").write_bytes(b"old counts")
    # An inherited folder of ours is another service's: `serve` never counts in it.
    second = _prepare(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(stale))
    assert second.returncode == 0, second.stderr
    fresh = Path(second.stdout.strip())
    assert fresh != stale and list(fresh.iterdir()) == []
    assert not stale.exists(), "the folder of a service that is gone is removed"


def test_attack_a_metrics_base_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    base = tmp_path / f"capability-anchor-metrics-{os.getuid()}"
    base.mkdir(mode=0o777)
    base.chmod(0o777)  # another user could plant counts or links there
    out = _prepare(tmp_path)
    assert out.returncode == 2
    assert "not a private folder" in out.stderr and str(base) in out.stderr


def test_a_cli_process_counts_nothing_and_loads_no_metrics_client(tmp_path: Path) -> None:
    """Only the service's processes count: a CLI command's append and checkpoint would
    count into nothing any scrape reads, and prometheus-client costs ~0.1 s to import."""
    code = (
        "import sys\n"
        "from capability_anchor.log import Log\n"
        f"log = Log.init({str(tmp_path / 'd')!r}, iss={ISS!r})\n"
        "from tests.kit.obskit import observation\n"
        "log.append([observation(1)]); log.checkpoint(); log.close()\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False", out.stderr

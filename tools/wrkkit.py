"""wrk (Debian's, 4.1.0) as the closed-loop load of the write benchmark (`bench_writes.py`):
a Lua script that counts answers by status inside wrk, so what the server acknowledged is
known exactly, not inferred from wrk's "Non-2xx" line.

Three modes of one script:
- `get PATH`: the same request on every connection (the HTTP floor, `GET /healthz`);
- `random FORMAT N`: `GET` of `string.format(FORMAT, i)`, i uniform in 0..N-1 per request
  (`/record?id=` at random servers, `bench_record_size.py`);
- `post`: `POST /records` with the writer token, each request one NEW record: the body is
  `{"records":[benchkit.record(0, MARK)]}` with MARK replaced by `<nonce>t<thread>n<count>`,
  so every record is unique in the run (its `sub` and `url` carry that id) and has
  benchkit.record's shape and size.

Each wrk thread counts its answers by status, the 200s that were not duplicates
(acknowledged) and the duplicates, and keeps a sample of acknowledged entries (day, leaf
index, leaf hash: the first and every `SAMPLE_EVERY`-th, at most `SAMPLE_MAX` a thread);
`done` adds them up and prints `BENCH ...` lines that `parse` reads. Latency is wrk's (from
sending a request to its answer, every status, microseconds; closed loop, so it includes
no waiting for a free connection). `--timeout` is 10 s, so a slow answer counts as an
answer, not as a wrk timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchkit import record

WRK = Path("/usr/bin/wrk")
MARK = "QQWRKIDQQ"  # letters only: no Lua pattern character, nothing JSON escapes
SAMPLE_EVERY = 97
SAMPLE_MAX = 50
TIMEOUT = "10s"

SCRIPT = r"""
local threads = {}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("tid", next_id)
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  counter, acked, duplicates, nsamples, seen = 0, 0, 0, 0, 0
  statuses, samples = {}, {}
  if mode == "get" then
    req = wrk.format("GET", args[2])
  elseif mode == "random" then
    path, n, step = args[2], tonumber(args[3]), tonumber(args[4] or "1")
    math.randomseed(os.time() + tid)
  else
    headers = {["Authorization"] = "Bearer " .. args[2], ["Content-Type"] = "application/json"}
    nonce, template = args[3], args[4]
    every, most = tonumber(args[5]), tonumber(args[6])
  end
end

function request()
  if mode == "get" then return req end
  if mode == "random" then
    return wrk.format("GET", string.format(path, math.random(0, n - 1) * step))
  end
  counter = counter + 1
  local id = nonce .. "t" .. tid .. "n" .. counter
  return wrk.format("POST", "/records", headers, (template:gsub("QQWRKIDQQ", id)))
end

function response(status, hdrs, body)
  local key = tostring(status)
  statuses[key] = (statuses[key] or 0) + 1
  if mode ~= "post" or status ~= 200 then return end
  if not body:find('"duplicate"%s*:%s*true') then
    acked = acked + 1
    seen = seen + 1
    if (seen == 1 or seen % every == 0) and nsamples < most then
      local day = body:match('"day"%s*:%s*"([%d-]+)"')
      local index = body:match('"leaf_index"%s*:%s*(%d+)')
      local hash = body:match('"leaf_hash"%s*:%s*"(%x+)"')
      if day and index and hash then
        nsamples = nsamples + 1
        samples[nsamples] = day .. " " .. index .. " " .. hash
      end
    end
  else
    duplicates = duplicates + 1
  end
end

function done(summary, latency, requests)
  local total, dups = 0, 0
  local codes = {}
  for _, t in ipairs(threads) do
    total = total + t:get("acked")
    dups = dups + t:get("duplicates")
    for k, v in pairs(t:get("statuses")) do codes[k] = (codes[k] or 0) + v end
    for _, s in ipairs(t:get("samples")) do io.write("BENCH sample " .. s .. "\n") end
  end
  for k, v in pairs(codes) do io.write("BENCH status " .. k .. " " .. v .. "\n") end
  local e = summary.errors
  io.write(string.format("BENCH summary %d %d %d %d %d %d %d %d\n", summary.duration,
    summary.requests, total, dups, e.connect, e.read, e.write, e.timeout))
  io.write(string.format("BENCH latency %d %d %d %d\n", latency:percentile(50),
    latency:percentile(99), latency.max, latency.mean))
end
"""


def available() -> bool:
    return WRK.exists() or shutil.which("wrk") is not None


def script_file(folder: Path) -> Path:
    path = folder / "bench_writes.lua"
    path.write_text(SCRIPT)
    return path


def post_template() -> str:
    """The body of one `POST /records`: one benchkit.record whose id is MARK."""
    text = json.dumps({"records": [record(0, MARK)]}, separators=(",", ":"))
    assert "%" not in text  # a Lua replacement string: % would be special
    return text


@dataclass
class Sample:
    day: str
    leaf_index: int
    leaf_hash: str


@dataclass
class WrkResult:
    duration: float = 0.0  # s
    requests: int = 0
    acknowledged: int = 0  # 200 answers that do not say `"duplicate": true`
    duplicates: int = 0
    socket_errors: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    p50: float = float("nan")  # s
    p99: float = float("nan")
    max: float = float("nan")
    mean: float = float("nan")
    samples: list[Sample] = field(default_factory=list)
    output: str = ""

    @property
    def rate(self) -> float:
        """Answers per second (every status)."""
        return self.requests / self.duration if self.duration else 0.0

    @property
    def ok_rate(self) -> float:
        return self.statuses["200"] / self.duration if self.duration else 0.0

    @property
    def accepted_rate(self) -> float:
        return self.acknowledged / self.duration if self.duration else 0.0

    def describe(self, what: str) -> str:
        return (
            f"{what}: {self.requests:,} answers in {self.duration:.1f} s ({self.rate:,.0f}/s), "
            f"statuses {dict(self.statuses)}, socket errors {dict(self.socket_errors) or 0}; "
            f"latency p50 {self.p50 * 1e3:.1f} ms, p99 {self.p99 * 1e3:.1f} ms, max "
            f"{self.max * 1e3:.0f} ms"
        )

    @property
    def other(self) -> int:
        """Answers neither 200 nor 503, plus socket errors and timeouts."""
        bad = sum(v for k, v in self.statuses.items() if k not in ("200", "503"))
        return bad + sum(self.socket_errors.values())


def parse(output: str) -> WrkResult:
    result = WrkResult(output=output)
    for line in output.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] != "BENCH":
            continue
        kind, values = parts[1], parts[2:]
        if kind == "sample":
            result.samples.append(Sample(values[0], int(values[1]), values[2]))
        elif kind == "status":
            result.statuses[values[0]] += int(values[1])
        elif kind == "summary":
            n = [int(v) for v in values]
            result.duration, result.requests = n[0] / 1e6, n[1]
            result.acknowledged, result.duplicates = n[2], n[3]
            for name, count in zip(("connect", "read", "write", "timeout"), n[4:], strict=True):
                if count:
                    result.socket_errors[name] = count
        elif kind == "latency":
            result.p50, result.p99, result.max, result.mean = (int(v) / 1e6 for v in values)
    if not result.duration:
        raise RuntimeError(f"wrk printed no summary:\n{output}")
    return result


def argv(
    url: str, script: Path, duration: float, connections: int, *script_args: str, threads: int = 0
) -> list[str]:
    """wrk's command line; `threads` 0: one per connection, at most two."""
    threads = threads or max(1, min(2, connections))
    return [
        str(WRK if WRK.exists() else shutil.which("wrk")),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",  # whole seconds
        f"--timeout={TIMEOUT}",
        "--latency",
        "-s",
        str(script),
        url,
        "--",
        *script_args,
    ]


def get_args(path: str) -> list[str]:
    return ["get", path]


def random_args(path_format: str, n: int, step: int = 1) -> list[str]:
    """`path_format` (a Lua `string.format` with one integer) at i * step, i uniform in
    0..n-1."""
    return ["random", path_format, str(n), str(step)]


def post_args(token: str) -> list[str]:
    nonce = os.urandom(4).hex()
    return ["post", token, nonce, post_template(), str(SAMPLE_EVERY), str(SAMPLE_MAX)]


async def run(
    url: str,
    script: Path,
    duration: float,
    connections: int,
    script_args: list[str],
    threads: int = 0,
) -> WrkResult:
    """wrk for `duration` s (whole seconds: wrk's unit) against `url`, as a subprocess."""
    proc = await asyncio.create_subprocess_exec(
        *argv(url, script, duration, connections, *script_args, threads=threads),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"wrk exited with {proc.returncode}:\n{text}")
    return parse(text)

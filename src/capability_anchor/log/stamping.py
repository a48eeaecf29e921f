"""Stamping sealed heads with RFC 3161 TSAs (SPEC §7): configuration, one pass over what is
missing, and the service's retry schedule. It fails open: a bad TSA costs at most its deadline
per pass; only verified replies are stored."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from capability_anchor.errors import CapabilityAnchorError, StoreBusy, TimestampError, UsageError
from capability_anchor.metrics.service import observe
from capability_anchor.timestamp import (
    DEFAULT_DEADLINE_S,
    cas_of_pem,
    pem_of,
    stamp,
    trusted_cas,
)

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

    from . import Log

# Service retries per TSA after a failure: 30 s, doubling, at most an hour, with jitter.
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 3600.0
# How often the service looks for sealed heads without stamps when nothing failed.
POLL_S = 60.0


@dataclass(frozen=True)
class TsaConfig:
    """Which TSAs stamp sealed heads and which CAs their tokens must chain to."""

    urls: tuple[str, ...] = ()
    ca_pem: str = ""
    """The trusted TSA CA certificates as PEM, each once (duplicates across files dropped)."""
    deadline: float = DEFAULT_DEADLINE_S

    @classmethod
    def from_files(
        cls, urls: Sequence[str], ca_files: Sequence[str | Path], deadline: float | None = None
    ) -> TsaConfig:
        """From `--tsa` and `--tsa-ca` (checked: see `check`)."""
        return cls.resolve({}, urls, ca_files, deadline)

    @classmethod
    def resolve(
        cls,
        stored: Mapping[str, Any],
        urls: Sequence[str] = (),
        ca_files: Sequence[str | Path] = (),
        deadline: float | None = None,
    ) -> TsaConfig:
        """The stored configuration, each part replaced by what the command line gives (§7)."""
        stored_urls = stored.get("tsa", [])
        stored_pem = stored.get("tsa_ca", "")
        if not isinstance(stored_urls, list) or not all(isinstance(u, str) for u in stored_urls):
            raise UsageError("the data dir's stored TSA list is malformed")
        if not isinstance(stored_pem, str):
            raise UsageError("the data dir's stored TSA CA certificates are malformed")
        config = cls(
            tuple(urls) if urls else tuple(stored_urls),
            pem_of(trusted_cas(ca_files)) if ca_files else stored_pem,
            DEFAULT_DEADLINE_S if deadline is None else deadline,
        )
        config.check()
        return config

    def to_config(self) -> dict[str, Any]:
        """What `init` stores in the data dir's config."""
        return {"tsa": list(self.urls), "tsa_ca": self.ca_pem}

    def check(self) -> None:
        """Usage errors before anything is sealed: a non-http(s) URL, no CA, a bad deadline."""
        for url in self.urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise UsageError(f"--tsa {url!r} is not an http:// or https:// URL")
        if len(set(self.urls)) != len(self.urls):
            raise UsageError("a TSA is given twice")
        if self.urls and not self.ca_pem:
            raise UsageError("a TSA needs a trusted CA: give --tsa-ca PEM")
        if not 0 < self.deadline <= 600:
            raise UsageError("--tsa-deadline must be more than 0 and at most 600 seconds")
        if self.ca_pem:
            self.cas()

    def cas(self) -> list[Certificate]:
        return cas_of_pem(self.ca_pem)


@dataclass(frozen=True)
class StampResult:
    """One TSA's answer for one sealed day: stored (gen_time) or failed (error)."""

    day: str
    tsa: str
    gen_time: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe(self) -> str:
        """One line for a person (stderr, the service's log)."""
        if self.error is None:
            return f"{self.day} stamped by {self.tsa} at {self.gen_time}"
        return f"{self.day} not stamped by {self.tsa}: {self.error}"

    def to_json(self) -> dict[str, Any]:
        if self.error is None:
            return {"day": self.day, "tsa": self.tsa, "gen_time": self.gen_time}
        return {"day": self.day, "tsa": self.tsa, "error": self.error}


def stamp_day(log: Log, day: str, jws: bytes, url: str, config: TsaConfig) -> StampResult:
    """Ask one TSA to stamp one sealed head; store the reply if it verifies."""
    try:
        reply, verified = stamp(url, jws, config.cas(), deadline=config.deadline)
    except TimestampError as exc:
        return StampResult(day, url, error=str(exc))
    try:
        log.add_stamp(day, url, reply, verified.gen_time)
    except CapabilityAnchorError as exc:  # e.g. the database is busy: retried like a TSA fault
        if isinstance(exc, StoreBusy):
            observe().store_busy.inc()
        return StampResult(day, url, error=f"the verified stamp could not be stored: {exc}")
    return StampResult(day, url, gen_time=verified.gen_time)


def stamp_missing(
    log: Log,
    config: TsaConfig,
    days: Collection[str] | None = None,
    tsas: Collection[str] | None = None,
    on_result: Callable[[StampResult], None] | None = None,
) -> list[StampResult]:
    """Each TSA stamps the sealed heads it lacks, oldest first, until its first failure."""
    results: list[StampResult] = []
    targets = [t for t in log.stamp_targets() if days is None or t[0] in days]
    for url in config.urls:
        if tsas is not None and url not in tsas:
            continue
        for day, jws, stamped_by in targets:
            if url in stamped_by:
                continue
            result = stamp_day(log, day, jws, url, config)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if not result.ok:
                break
    return results


@dataclass
class Stamper:
    """The service's stamping schedule: a pass when needed, a growing jittered delay per TSA."""

    log: Log
    config: TsaConfig
    retry_first: float = RETRY_FIRST_S
    clock: Callable[[], float] = time.monotonic
    report: Callable[[StampResult], None] = lambda result: None
    _next: dict[str, float] = field(default_factory=dict)
    _failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wake(self) -> None:
        """Something was sealed: TSAs that are not backing off try at the next pass."""
        with self._lock:
            for url in self.config.urls:
                if not self._failures.get(url):
                    self._next[url] = 0.0

    def due(self) -> bool:
        now = self.clock()
        with self._lock:
            return any(self._next.get(url, 0.0) <= now for url in self.config.urls)

    def run_once(self) -> list[StampResult]:
        now = self.clock()
        with self._lock:
            ready = [u for u in self.config.urls if self._next.get(u, 0.0) <= now]
        results = stamp_missing(self.log, self.config, tsas=ready, on_result=self.report)
        failed = {r.tsa for r in results if not r.ok}
        now = self.clock()
        with self._lock:
            for url in ready:
                if url in failed:
                    n = self._failures.get(url, 0) + 1
                    self._failures[url] = n
                    delay = min(RETRY_MAX_S, self.retry_first * 2 ** (n - 1))
                    self._next[url] = now + delay * random.uniform(0.8, 1.2)  # noqa: S311 (jitter)
                else:
                    self._failures[url] = 0
                    self._next[url] = now + POLL_S
        return results

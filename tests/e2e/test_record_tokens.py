"""`GET /record` on a real server signs a token once per state (issue #37): the same state
gets the identical token; a new head, a newer entry, a rotation or a revocation, and a
token's lifetime running down each get a new one at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.kit.obskit import observation
from tests.kit.rotationkit import kid_file, ok, token_kid
from tests.kit.serverkit import serving


def record(client: httpx.Client, sub: str = "example:a-0") -> dict[str, Any]:
    answer = client.get("/record", params={"id": sub})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def prove(client: httpx.Client, headers: dict[str, str], *records: dict[str, Any]) -> None:
    """Store `records` and sign a head over them at once (`?prove=1`)."""
    iss = str(client.base_url).rstrip("/")
    body = {"records": [{**r, "iss": iss} for r in records]}
    answer = client.post("/records?prove=1", json=body, headers=headers)
    assert answer.status_code == 200, answer.text


def test_each_change_of_state_gets_a_new_token_and_nothing_else_does(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--rate-limit", "0") as live, live.client() as client:
        headers = live.writer_headers()
        prove(client, headers, observation(0, "a"), observation(1, "a"))
        first = record(client)
        time.sleep(1.1)  # a token signed now would have another iat
        assert record(client) == first  # the same state: the identical token

        prove(client, headers, observation(0, "b"))  # a new head, no new entry of a-0
        headed = record(client)
        assert headed["jws"] != first["jws"]
        assert headed["proof"]["leaf_index"] == first["proof"]["leaf_index"]
        assert headed["proof"]["tree_size"] == 3 > first["proof"]["tree_size"]
        assert record(client) == headed

        prove(client, headers, observation(0, "a", name="newer"))  # a newer entry, a head
        newer = record(client)
        assert newer["name"] == "newer" and newer["proof"]["leaf_index"] == 3
        assert newer["proof"]["tree_size"] == 4

        old = kid_file(data)
        assert token_kid(newer["jws"]) == old
        ok("rotate-key", "--data", data)
        assert record(client) == newer  # only announced: the old key still signs
        ok("rotate-key", "--data", data, "--activate", "--force")
        rotated = record(client)
        assert token_kid(rotated["jws"]) == kid_file(data) != old
        assert record(client) == rotated

        done = ok("rotate-key", "--data", data, "--compromised")  # a revocation
        revoked = record(client)
        assert token_kid(revoked["jws"]) == done["kid"] == kid_file(data)
        assert token_kid(rotated["jws"]) != done["kid"]


def test_a_token_is_not_reused_once_its_lifetime_runs_under_the_rule(tmp_path: Path) -> None:
    """A 10 s lifetime: reused while at least 9 s remain, so never 2 s later."""
    data = tmp_path / "data"
    with (
        serving(data, "--rate-limit", "0", "--record-lifetime", "10") as live,
        live.client() as client,
    ):
        prove(client, live.writer_headers(), observation(0, "a"))
        first = record(client)
        assert first["exp"] - first["iat"] == 10
        time.sleep(2.1)
        later = record(client)
        assert later["iat"] > first["iat"] and later["jws"] != first["jws"]

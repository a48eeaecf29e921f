"""The sequencer's wire (`log/handoff.py`) and the service's answer built from it
(`service/sequencing.py`): every request survives its frame, an oversized frame is refused
before it is read, and a non-proving answer formatted directly is byte for byte what the
answer's Structs give."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from capability_anchor.api.caching import ordered_answer
from capability_anchor.api.models import AppendedEntry
from capability_anchor.api.routes.writes import appended_entries
from capability_anchor.errors import StoreError
from capability_anchor.log.handoff import (
    MAX_FRAME,
    Append,
    Checkpoint,
    EncodedAppend,
    Reply,
    Seal,
    encode_prepared,
    frame,
    frame_length,
    prepared_decoder,
    reply_decoder,
    request_decoder,
    results_of,
)

PREPARED = [
    (bytes([i]) * 32, b'{"a":%d}' % i, ("sub:x", f"url:https://s{i}.example")) for i in range(3)
]


@pytest.mark.parametrize(
    "request_",
    [Append(7, PREPARED, True, 1.5, 2.5), Checkpoint(8, 1.0, 2.0), Seal(9, 3.0, 4.0)],
)
def test_every_request_survives_its_frame(request_: Append | Checkpoint | Seal) -> None:
    data = frame(request_)
    assert frame_length(data[:4]) == len(data) - 4
    assert request_decoder.decode(data[4:]) == request_


def test_a_batch_encoded_by_a_body_worker_is_the_same_frame() -> None:
    encoded = encode_prepared(PREPARED)
    raw = EncodedAppend(7, msgspec.Raw(encoded), True, 1.5, 2.5)
    assert frame(raw) == frame(Append(7, PREPARED, True, 1.5, 2.5))
    assert prepared_decoder.decode(encoded) == PREPARED


def test_a_reply_survives_its_frame() -> None:
    reply = Reply(3, "ok", ["2026-12-02", [[0, False]]], [("capability_anchor.heads", 20, "x")])
    back = reply_decoder.decode(frame(reply)[4:])
    assert (
        back.id == 3 and back.code == "ok" and back.events == [("capability_anchor.heads", 20, "x")]
    )


def test_an_oversized_frame_is_refused_before_it_is_read() -> None:
    with pytest.raises(ValueError, match="over"):
        frame_length((MAX_FRAME + 1).to_bytes(4, "big"))


@given(st.lists(st.tuples(st.integers(0, 2**40), st.booleans()), min_size=1, max_size=30))
def test_the_formatted_answer_is_the_structs_answer(placed: list[tuple[int, bool]]) -> None:
    prepared = [(bytes([i % 256]) * 32, b"x", ()) for i in range(len(placed))]
    value = ("2026-12-02", placed)
    structs = ordered_answer(
        list[AppendedEntry], [r.to_json() for r in results_of(prepared, value)]
    )
    assert appended_entries(b"".join(p[0] for p in prepared), value) == structs


def test_an_answer_of_another_length_is_refused() -> None:
    with pytest.raises(StoreError):
        appended_entries(b"".join(p[0] for p in PREPARED), ("2026-12-02", [(0, False)]))

"""Wire format: field presence, round trips, malformed input, generated code freshness."""

from pathlib import Path

import pytest
from google.protobuf.internal import api_implementation
from hypothesis import given, settings
from hypothesis import strategies as st

from sdschat.sds import HistoryEntry, Message, WireError, wire
from sdschat.sds.protogen import generate

ROOT = Path(__file__).resolve().parents[1]


def test_runtime_uses_upb_backend():
    assert api_implementation.Type() == "upb"


def test_generated_code_is_current(tmp_path):
    fresh = generate(tmp_path)
    assert fresh.read_text() == (ROOT / "sdschat" / "sds" / "sds_pb2.py").read_text()


def test_proto_matches_rfc_field_numbers():
    from sdschat.sds import sds_pb2

    fields = {f.name: (f.number, f.has_presence, f.is_repeated) for f in sds_pb2.Message.DESCRIPTOR.fields}
    assert fields == {
        "sender_id": (1, False, False),
        "message_id": (2, False, False),
        "channel_id": (3, False, False),
        "lamport_timestamp": (10, True, False),
        "causal_history": (11, False, True),
        "bloom_filter": (12, True, False),
        "repair_request": (13, False, True),
        "content": (20, True, False),
    }
    entry = {f.name: (f.number, f.has_presence) for f in sds_pb2.HistoryEntry.DESCRIPTOR.fields}
    assert entry == {"message_id": (1, False), "retrieval_hint": (2, True), "sender_id": (3, True)}


def test_absent_optionals_read_as_none():
    data = wire.encode(Message("s", "m", "c", content=b"x"))
    msg = wire.decode(data)
    assert msg.lamport_timestamp is None
    assert msg.bloom_filter is None
    assert msg.causal_history == [] and msg.repair_request == []
    assert msg.content == b"x"


def test_zero_lamport_and_empty_content_are_present_not_none():
    data = wire.encode(Message("s", "m", "c", lamport_timestamp=0, content=b"", bloom_filter=b""))
    msg = wire.decode(data)
    assert msg.lamport_timestamp == 0
    assert msg.content == b""
    assert msg.bloom_filter == b""


def test_encoding_writes_exactly_present_fields_in_field_order():
    msg = Message(
        "alice",
        "id1",
        "chan",
        lamport_timestamp=5,
        causal_history=[HistoryEntry("a", b"h", "bob"), HistoryEntry("b")],
        bloom_filter=b"\x00\x01",
        repair_request=[HistoryEntry("z", None, "carol")],
        content=b"hi",
    )
    data = wire.encode(msg)
    expected = (
        b"\x0a\x05alice"
        b"\x12\x03id1"
        b"\x1a\x04chan"
        b"\x50\x05"
        b"\x5a\x0b\x0a\x01a\x12\x01h\x1a\x03bob"
        b"\x5a\x03\x0a\x01b"
        b"\x62\x02\x00\x01"
        b"\x6a\x0a\x0a\x01z\x1a\x05carol"
        b"\xa2\x01\x02hi"
    )
    assert data == expected
    assert wire.decode(data) == msg


def test_history_entry_optionals():
    msg = wire.decode(wire.encode(Message("s", "m", "c", 1, [HistoryEntry("x")])))
    assert msg.causal_history[0] == HistoryEntry("x", None, None)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff",  # truncated varint key
        b"\x0a\x05ab",  # length past the end
        b"\x0a\x02\xff\xfe",  # invalid UTF-8 in a string field
        b"\x50",  # field 10 without its varint
        b"\x5a\x03\x0a\x05a",  # nested entry truncated
        b"\x0f",  # wire type 7 (invalid)
    ],
)
def test_malformed_raises_wire_error(data):
    with pytest.raises(WireError):
        wire.decode(data)


def test_non_bytes_and_oversized_raise_wire_error():
    with pytest.raises(WireError):
        wire.decode("not bytes")  # type: ignore[arg-type]
    with pytest.raises(WireError):
        wire.decode(b"\x00" * (wire.MAX_FRAME_BYTES + 1))


def test_encode_bad_values_raise_wire_error():
    with pytest.raises(WireError):
        wire.encode(Message("s", "m", "c", lamport_timestamp=-1))


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_wire_error(data):
    try:
        msg = wire.decode(data)
    except WireError:
        return
    assert isinstance(msg, Message)
    # whatever decodes re-encodes to a frame that decodes to the same message
    assert wire.decode(wire.encode(msg)) == msg


entries = st.builds(
    HistoryEntry, st.text(max_size=20), st.none() | st.binary(max_size=8), st.none() | st.text(max_size=8)
)


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        Message,
        st.text(max_size=10),
        st.text(max_size=70),
        st.text(max_size=10),
        st.none() | st.integers(0, 2**64 - 1),
        st.lists(entries, max_size=4),
        st.none() | st.binary(max_size=32),
        st.lists(entries, max_size=3),
        st.none() | st.binary(max_size=40),
    )
)
def test_round_trip(msg):
    data = wire.encode(msg)
    assert wire.decode(data) == msg
    assert wire.encode(wire.decode(data)) == data

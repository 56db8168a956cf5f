"""Every value in the @waku/sds 0.0.8 reference vectors, reproduced."""

import hashlib
from pathlib import Path

import pytest

from sdschat.sds import BloomFilter, HistoryEntry, Message, message_id, repair, wire
from sdschat.sds.bloom import bloom_parameters


def test_vector_copy_matches_shared():
    here = Path(__file__).resolve().parent / "data" / "waku-sds-0.0.8.json"
    shared = here.parents[3] / "shared" / "vectors" / here.name
    assert here.exists()
    if shared.exists():  # in a clone with shared/ beside it, the copy must be current
        assert shared.read_bytes() == here.read_bytes()


def test_message_ids(waku_vectors):
    assert waku_vectors["message_ids"]
    for v in waku_vectors["message_ids"]:
        assert message_id(bytes.fromhex(v["payload_hex"])) == v["message_id"]


def test_default_bloom_parameters(waku_vectors):
    opts = waku_vectors["bloom"]["options"]
    assert bloom_parameters(int(opts["capacity"]), float(opts["errorRate"])) == (150_000, 10, 18_752)


def test_bloom_filters(waku_vectors):
    filters = waku_vectors["bloom"]["filters"]
    assert len(filters) >= 3
    for v in filters:
        f = BloomFilter()
        for member in v["members"]:
            f.add(member)
        data = f.to_bytes()
        assert len(data) == v["length"]
        assert hashlib.sha256(data).hexdigest() == v["sha256"]
        if "bytes_hex" in v:
            assert data.hex() == v["bytes_hex"]
        for member in v["members"]:
            assert member in f
        for probe in v["non_member_probes"]:
            assert (probe["id"] in f) == probe["lookup"]
        again = BloomFilter.from_bytes(data)
        assert again.to_bytes() == data
        # bits 150,000..150,015 lie beyond m: the top 16 bits of the last big-endian word
        assert data[-8:-6] == b"\x00\x00"


@pytest.mark.parametrize("i", range(18))
def test_repair_timing(waku_vectors, i):
    v = waku_vectors["repair"][i]
    now = 1_700_000_000_000
    assert repair.t_req(v["participant"], v["message_id"], now, v["t_min"], v["t_max"]) - now == v["t_req_offset"]
    assert repair.t_resp(v["participant"], v["sender"], v["message_id"], now, v["t_max"]) - now == v["t_resp_offset"]
    got = repair.in_response_group(v["participant"], v["sender"], v["message_id"], v["num_response_groups"])
    assert got == v["in_response_group"]


def test_repair_vector_count(waku_vectors):
    assert len(waku_vectors["repair"]) == 18


def _entries(raw):
    return [
        HistoryEntry(
            e["message_id"], bytes.fromhex(e["retrieval_hint"]) if e.get("retrieval_hint") else None, e.get("sender_id")
        )
        for e in raw
    ]


def test_frames_decode_and_reencode(waku_vectors):
    frames = waku_vectors["frames"]
    assert {f["kind"] for f in frames} >= {"content", "sync_with_repair_request", "ephemeral"}
    for f in frames:
        data = bytes.fromhex(f["hex"])
        msg = wire.decode(data)
        assert msg.sender_id == f["sender_id"]
        assert msg.message_id == f["message_id"]
        assert msg.channel_id == f["channel_id"]
        expected_lt = None if f["lamport_timestamp"] is None else int(f["lamport_timestamp"])
        assert msg.lamport_timestamp == expected_lt
        assert msg.causal_history == _entries(f["causal_history"])
        assert msg.repair_request == _entries(f["repair_request"])
        if f["bloom_filter_sha256"] is None:
            assert msg.bloom_filter is None
        else:
            assert hashlib.sha256(msg.bloom_filter).hexdigest() == f["bloom_filter_sha256"]
        if f["content_hex"] is None:
            assert msg.content is None
        else:
            assert msg.content == bytes.fromhex(f["content_hex"])
        assert wire.encode(msg) == data


def test_frames_built_from_fields_are_identical(waku_vectors):
    """Encoding from the decoded field values (not from the parsed object) gives the same bytes."""
    for f in waku_vectors["frames"]:
        data = bytes.fromhex(f["hex"])
        decoded = wire.decode(data)
        rebuilt = Message(
            sender_id=f["sender_id"],
            message_id=f["message_id"],
            channel_id=f["channel_id"],
            lamport_timestamp=None if f["lamport_timestamp"] is None else int(f["lamport_timestamp"]),
            causal_history=_entries(f["causal_history"]),
            bloom_filter=decoded.bloom_filter,
            repair_request=_entries(f["repair_request"]),
            content=None if f["content_hex"] is None else bytes.fromhex(f["content_hex"]),
        )
        assert wire.encode(rebuilt) == data


def test_content_frames_have_the_senders_bloom_before_the_message(waku_vectors):
    """The first message's bloom is all zeros; a message's own id is never in its bloom."""
    content = [f for f in waku_vectors["frames"] if f["kind"] == "content"]
    first = wire.decode(bytes.fromhex(content[0]["hex"]))
    assert set(first.bloom_filter) == {0}
    for f in content:
        msg = wire.decode(bytes.fromhex(f["hex"]))
        bloom = BloomFilter.from_bytes(msg.bloom_filter)
        assert msg.message_id not in bloom
        for entry in msg.causal_history:
            assert entry.message_id in bloom

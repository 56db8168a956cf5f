"""Bloom filter: membership, false-positive rate, serialization, rolling."""

from __future__ import annotations

import hashlib

import pytest

from sdschat.sds import BloomFilter, RollingBloomFilter
from sdschat.sds.bloom import bloom_parameters


def ids(prefix: str, n: int) -> list[str]:
    return [hashlib.sha256(f"{prefix}-{i}".encode()).hexdigest() for i in range(n)]


def fp_rate(f, probes: list[str]) -> float:
    return sum(1 for p in probes if p in f) / len(probes)


def test_parameters_match_waku_defaults():
    # 10,000 / 0.001 -> 15 bits per element, 10 hashes, 150,000 bits in 2,344 words
    assert bloom_parameters(10_000, 0.001) == (150_000, 10, 18_752)
    f = BloomFilter()
    assert f.m == 150_000 and f.k == 10 and len(f.to_bytes()) == 18_752


@pytest.mark.parametrize("capacity,rate", [(0, 0.01), (10, 0.0), (10, 1.0), (10, 1.5)])
def test_bad_parameters_are_refused(capacity, rate):
    with pytest.raises(ValueError):
        BloomFilter(capacity, rate)


def test_insert_and_lookup():
    f = BloomFilter(100, 0.01)
    assert "alpha" not in f
    f.add("alpha")
    assert "alpha" in f
    assert "beta" not in f
    f.add("beta")
    assert "alpha" in f and "beta" in f


def test_empty_filter_contains_nothing():
    f = BloomFilter(1_000, 0.01)
    assert not any(x in f for x in ids("probe", 2_000))
    assert f.false_positive_rate() == 0.0


def test_no_false_negatives_over_many_ids():
    f = BloomFilter(5_000, 0.001)
    members = ids("member", 5_000) + ["non-hex id é ü 漢字", "sync-abc", "", "x" * 300]
    for m in members:
        f.add(m)
    assert all(m in f for m in members)


def test_false_positive_rate_near_configured_rate():
    capacity, rate = 2_000, 0.01
    f = BloomFilter(capacity, rate)
    for m in ids("member", capacity):
        f.add(m)
    measured = fp_rate(f, ids("probe", 40_000))
    # the sizing rounds bits-per-element up, so the real rate is at or a little below the target
    assert 0.002 < measured < 2 * rate
    # the filter's own estimate agrees with what we measured
    assert f.false_positive_rate() == pytest.approx(measured, rel=0.5)


def test_serialization_round_trip():
    f = BloomFilter(1_000, 0.01)
    members = ids("member", 700)
    for m in members:
        f.add(m)
    data = f.to_bytes()
    assert isinstance(data, bytes) and len(data) == f.n_bytes
    g = BloomFilter.from_bytes(data, 1_000, 0.01)
    assert g.to_bytes() == data
    assert all(m in g for m in members)
    probes = ids("probe", 5_000)
    assert [p in g for p in probes] == [p in f for p in probes]


def test_serialization_is_a_copy():
    f = BloomFilter(100, 0.01)
    data = f.to_bytes()
    f.add("later")
    assert data == bytes(len(data))
    assert "later" not in BloomFilter.from_bytes(data, 100, 0.01)


def test_from_bytes_refuses_other_lengths():
    f = BloomFilter(100, 0.01)
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(f.to_bytes() + b"\x00", 100, 0.01)
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(f.to_bytes()[:-1], 100, 0.01)


def test_rolling_filter_keeps_byte_length_and_bounds_fp_rate():
    capacity, rate = 500, 0.01
    rolling = RollingBloomFilter(capacity, rate)
    fixed = RollingBloomFilter(capacity, rate, rolling=False)
    n_bytes = rolling.n_bytes
    probes = ids("probe", 20_000)
    stream = ids("stream", capacity * 8)
    for i, m in enumerate(stream, 1):
        rolling.add(m)
        fixed.add(m)
        assert len(rolling.to_bytes()) == n_bytes
        assert len(rolling) <= capacity
        if i % capacity == 0:
            assert fp_rate(rolling, probes) < 2 * rate
    assert rolling.rolls > 0 and fixed.rolls == 0
    assert len(fixed.to_bytes()) == n_bytes
    # the newest ids are always members of the rolling filter
    assert all(m in rolling for m in stream[-capacity // 2 :])
    # the non-rolling filter saturates: its false-positive rate grows far beyond the configured one
    assert fp_rate(fixed, probes) > 20 * rate
    assert fixed.false_positive_rate() > 20 * rate
    assert rolling.false_positive_rate() < 2 * rate


def test_non_rolling_fp_rate_grows_with_load():
    capacity, rate = 300, 0.01
    f = RollingBloomFilter(capacity, rate, rolling=False)
    probes = ids("probe", 10_000)
    rates = []
    for chunk in range(4):
        for m in ids(f"load{chunk}", capacity):
            f.add(m)
        rates.append(fp_rate(f, probes))
    assert rates == sorted(rates) and rates[-1] > 10 * rates[0]


def test_rolling_ids_and_load_round_trip():
    f = RollingBloomFilter(50, 0.01)
    stream = ids("s", 130)
    for m in stream:
        f.add(m)
    held = f.ids()
    assert held == stream[-len(held) :]
    g = RollingBloomFilter(50, 0.01)
    g.load(held)
    assert g.to_bytes() == f.to_bytes()
    assert g.ids() == held


def test_rolling_filter_allocates_its_next_filter_only_when_it_starts_filling_it():
    """A rolling filter keeps a second bit array for the newest ids; one that never nears its capacity (a
    simulated member's, a quiet channel's) never allocates it, and the filter's bits are the same either way."""
    capacity = 100
    lazy = RollingBloomFilter(capacity, 0.01)
    stream = ids("n", capacity * 3)
    for i, m in enumerate(stream):
        if i < capacity - lazy.keep:
            assert lazy._next is None
        lazy.add(m)
    assert lazy.rolls == 4 and lazy._next is not None
    # the same stream into a filter restored from the first half gives the same bits
    again = RollingBloomFilter(capacity, 0.01)
    again.load(stream[: capacity // 2])
    assert again._next is None
    for m in stream[capacity // 2 :]:
        again.add(m)
    assert again.to_bytes() == lazy.to_bytes() and again.ids() == lazy.ids()


@pytest.mark.parametrize("rolling", [True, False])
def test_bits_of_additions_given_positions_are_set_when_read_and_read_the_same(rolling):
    """Additions that come with their positions (a simulator's receivers share them) leave their bits unset -- the
    bit array is not even allocated -- until the bits are read (bytes, a lookup, the fill), and read exactly as
    additions set at once: before and after the filter nears its capacity and rolls, and past the bound on pending
    additions."""
    from sdschat.sds import bloom as bloom_module

    capacity = 120
    eager = RollingBloomFilter(capacity, 0.01, rolling=rolling)
    lazy = RollingBloomFilter(capacity, 0.01, rolling=rolling)
    stream = ids("d", capacity * 3)
    for i, m in enumerate(stream, 1):
        eager.add(m)
        lazy.add(m, lazy.positions(m))
        if i == 10:
            assert lazy._pending and len(lazy.filter._bits) == 0  # not even allocated yet
            assert stream[0] in lazy and not lazy._pending
        if i % 37 == 0 or i in (capacity - lazy.keep - 1, capacity - lazy.keep, capacity, capacity + 1):
            assert lazy.to_bytes() == eager.to_bytes() and lazy.ids() == eager.ids() and lazy.rolls == eager.rolls
    assert lazy.false_positive_rate() == eager.false_positive_rate()
    assert bool(lazy.rolls) == rolling
    empty = RollingBloomFilter(capacity, 0.01, rolling=rolling)
    assert len(empty.filter._bits) == 0 and empty.to_bytes() == bytes(empty.n_bytes) and "x" not in empty
    # a filter that is never read holds at most the bound of pending additions
    many = RollingBloomFilter(10 * bloom_module._PENDING_MAX, 0.01)
    for m in ids("p", bloom_module._PENDING_MAX + 5):
        many.add(m, many.positions(m))
    assert len(many._pending) <= bloom_module._PENDING_MAX
    again = RollingBloomFilter(10 * bloom_module._PENDING_MAX, 0.01)
    again.load(many.ids())
    assert again.to_bytes() == many.to_bytes()

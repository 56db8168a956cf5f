"""Bloom filters, bit-for-bit compatible with @waku/sds 0.0.8.

Layout and hashing (what @waku/sds does, which is nim-bloom's scheme):

* ``bits_per_elem = ceil(-ln(error_rate) / ln(2)**2)``, ``k = round(ln(2) * bits_per_elem)``,
  ``m = capacity * bits_per_elem`` bits, stored in ``1 + m // 64`` 64-bit words.
  Defaults (10,000 / 0.001): m = 150,000, k = 10, 2,344 words = 18,752 bytes.
* Serialized as the words, each big-endian, no header. Bit ``p`` lives in word
  ``p // 64`` at bit ``p % 64``, i.e. byte ``8 * (p // 64) + 7 - (p % 64) // 8``,
  mask ``1 << (p % 8)``. We keep the filter as a ``bytearray`` in exactly that
  layout: serializing is one copy and a lookup in a *received* filter reads the
  frame's bytes directly.
* Position ``i`` of an id is ``abs(h_a + i * h_b) mod m`` where
  ``h_a = abs(murmur3_32(id)) mod m`` and ``h_b = abs(murmur3_32(id + " b")) mod m``
  (Nim's ``hashes.hash`` on strings: MurmurHash3 x86_32, seed 0, as a signed int).
  @waku/sds feeds the hash one *UTF-16 code unit per code point* (not UTF-8);
  for ASCII ids (hex hashes, ``sync-…``) that is the bytes themselves and we use
  mmh3; other ids take an exact pure-Python emulation.

:class:`RollingBloomFilter` is what a channel uses: the RFC says the filter
SHOULD roll over once it reaches capacity. @waku/sds never rolls, so its
false-positive rate grows without bound. Ours, when it holds ``capacity`` ids,
is rebuilt from the newest ``capacity // 2`` ids, so the false-positive rate
stays at or below the configured one. A rolled filter keeps its exact byte
length (receivers parse by length).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import mmh3
from bitarray import bitarray

__all__ = ["BloomFilter", "RollingBloomFilter", "bloom_parameters", "positions_in", "contains_in"]


def bloom_parameters(capacity: int, error_rate: float) -> tuple[int, int, int]:
    """Return ``(m_bits, k_hashes, n_bytes)`` as @waku/sds computes them."""
    if capacity < 1:
        raise ValueError("bloom capacity must be >= 1")
    if not 0.0 < error_rate < 1.0:
        raise ValueError("bloom error rate must be in (0, 1)")
    bits_per_elem = math.ceil(-1.0 * (math.log(error_rate) / (math.log(2) ** 2)))
    k = math.floor(math.log(2) * bits_per_elem + 0.5)  # JS Math.round
    m = capacity * bits_per_elem
    n_words = 1 + m // 64
    return m, k, n_words * 8


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _nim_murmur(units: list[int]) -> int:
    """Nim's murmurHash as compiled to JS, on a list of code units (may exceed 255)."""
    size = len(units)
    n = size // 4
    h1 = 0
    i = 0
    while i < n * 4:
        k1 = 0
        for j in (3, 2, 1, 0):
            k1 = ((k1 << 8) & 0xFFFFFFFF) | (units[i + j] & 0xFFFFFFFF)
        i += 4
        k1 = _rotl(_imul(k1, 3432918353), 15)
        k1 = _imul(k1, 461845907)
        h1 = _rotl(h1 ^ k1, 13)
        h1 = (((h1 * 5) & 0xFFFFFFFF) + 3864292196) & 0xFFFFFFFF
    k1 = 0
    for j in range(size % 4 - 1, -1, -1):
        k1 = ((k1 << 8) & 0xFFFFFFFF) | (units[i + j] & 0xFFFFFFFF)
    k1 = _imul(_rotl(_imul(k1, 3432918353), 15), 461845907)
    h1 ^= k1
    h1 ^= size & 0xFFFFFFFF
    h1 ^= h1 >> 16
    h1 = _imul(h1, 2246822507)
    h1 ^= h1 >> 13
    h1 = _imul(h1, 3266489909)
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def _code_units(item: str) -> list[int]:
    # JS: Array.from(item).map(c => c.charCodeAt(0)) -> first UTF-16 unit of each code point
    out = []
    for ch in item:
        cp = ord(ch)
        out.append(0xD800 + ((cp - 0x10000) >> 10) if cp > 0xFFFF else cp)
    return out


def _hash_pair(item: str, m: int) -> tuple[int, int]:
    if item.isascii():
        raw = item.encode("ascii")
        return abs(mmh3.hash(raw, 0, True)) % m, abs(mmh3.hash(raw + b" b", 0, True)) % m
    units = _code_units(item)
    return abs(_nim_murmur(units)) % m, abs(_nim_murmur(units + [32, 98])) % m


def positions_in(item: str, m: int, k: int) -> tuple[tuple[int, int], ...]:
    """``(byte_index, mask)`` pairs of ``item`` in the serialized layout.

    Bit ``p`` is byte ``8 * (p // 64) + 7 - (p % 64) // 8``, which is ``(p >> 3) ^ 7``.
    """
    a, b = _hash_pair(item, m)
    out = []
    p = a
    for _ in range(k):
        out.append(((p >> 3) ^ 7, 1 << (p & 7)))
        p += b
        if p >= m:
            p -= m
    return tuple(out)


def contains_in(data: bytes | bytearray, positions: tuple[tuple[int, int], ...]) -> bool:
    """Membership test directly on serialized filter bytes."""
    for idx, mask in positions:
        if not data[idx] & mask:
            return False
    return True


class BloomFilter:
    """A fixed bloom filter in @waku/sds's exact wire layout."""

    __slots__ = ("capacity", "error_rate", "m", "k", "n_bytes", "_bits")

    def __init__(self, capacity: int = 10_000, error_rate: float = 0.001, *, allocate: bool = True) -> None:
        """``allocate=False``: no bit array yet (``_bits`` empty), for an owner that reads the bits through itself
        and allocates them when it first sets one (:class:`RollingBloomFilter`)."""
        self.capacity = capacity
        self.error_rate = error_rate
        self.m, self.k, self.n_bytes = bloom_parameters(capacity, error_rate)
        self._bits = bytearray(self.n_bytes) if allocate else bytearray()

    def positions(self, item: str) -> tuple[tuple[int, int], ...]:
        return positions_in(item, self.m, self.k)

    def add(self, item: str) -> None:
        bits = self._bits
        for idx, mask in positions_in(item, self.m, self.k):
            bits[idx] |= mask

    def add_positions(self, positions: tuple[tuple[int, int], ...]) -> None:
        bits = self._bits
        for idx, mask in positions:
            bits[idx] |= mask

    def __contains__(self, item: str) -> bool:
        return contains_in(self._bits, positions_in(item, self.m, self.k))

    def to_bytes(self) -> bytes:
        return bytes(self._bits)

    @classmethod
    def from_bytes(cls, data: bytes, capacity: int = 10_000, error_rate: float = 0.001) -> BloomFilter:
        """Load a serialized filter; raises ``ValueError`` if its length does not fit the parameters."""
        f = cls(capacity, error_rate)
        if len(data) != f.n_bytes:
            raise ValueError(f"bloom filter of {len(data)} bytes, expected {f.n_bytes} for these parameters")
        f._bits[:] = data
        return f

    def clear(self) -> None:
        self._bits = bytearray(self.n_bytes)

    def fill_ratio(self) -> float:
        """Fraction of the ``m`` usable bits that are set."""
        ba = bitarray()
        ba.frombytes(bytes(self._bits))
        return ba.count() / self.m

    def false_positive_rate(self) -> float:
        """Estimated false-positive probability of a lookup now (fill ratio ** k)."""
        return self.fill_ratio() ** self.k


#: additions whose bits :class:`RollingBloomFilter` may leave unset (8 bytes each; their positions are shared)
_PENDING_MAX = 4096


class RollingBloomFilter:
    """A :class:`BloomFilter` that rolls over before it passes its capacity.

    It remembers the ids it holds (newest last). Once it holds ``capacity``
    ids, it rolls: it becomes a filter of just the newest ``keep`` (default
    ``capacity // 2``) ids, so it never holds more than ``capacity`` and its
    false-positive rate never exceeds the configured one. Byte length never
    changes. The next generation is built as ids arrive (each of the newest
    ``keep`` ids is set in both bit arrays), so a roll is a swap, not a rehash.
    """

    __slots__ = ("filter", "_ids", "keep", "rolls", "rolling", "_next", "_pending")

    def __init__(
        self, capacity: int = 10_000, error_rate: float = 0.001, keep: int | None = None, rolling: bool = True
    ) -> None:
        #: its bits are read through this class (:meth:`to_bytes`, ``in``): they are allocated when first set
        #: (empty until then: all zero), and may lag behind pending additions (``_pending``)
        self.filter = BloomFilter(capacity, error_rate, allocate=False)
        self._ids: deque[str] = deque()
        self.keep = max(1, min(capacity, capacity // 2 if keep is None else keep))
        self.rolls = 0
        #: ``False`` behaves like @waku/sds: never roll (the filter saturates).
        self.rolling = rolling
        #: the next filter, built from the newest ``keep`` ids; allocated when they start (a filter that never
        #: nears its capacity -- a simulated member's, a quiet channel's -- never holds a second bit array)
        self._next: bytearray | None = None
        #: positions given to :meth:`add` whose bits are not set yet: they are set when the bits are read
        #: (:meth:`to_bytes`, a lookup), so a member that never sends never sets them -- a simulated member
        #: that only receives, say (the simulator computes a message's positions once for all its receivers).
        #: Only while no roll is near (no next generation is being built), and at most ``_PENDING_MAX`` of them.
        self._pending: list[tuple[tuple[int, int], ...]] = []

    @property
    def capacity(self) -> int:
        return self.filter.capacity

    @property
    def n_bytes(self) -> int:
        return self.filter.n_bytes

    def positions(self, item: str) -> tuple[tuple[int, int], ...]:
        return self.filter.positions(item)

    def add(self, item: str, positions: tuple[tuple[int, int], ...] | None = None) -> bool:
        """Insert ``item`` (``positions`` if already computed). Returns True if the filter rolled first."""
        f = self.filter
        ids = self._ids
        pending = self._pending
        if (
            positions is not None
            and len(pending) < _PENDING_MAX
            and (not self.rolling or len(ids) < f.capacity - self.keep)
        ):
            ids.append(item)
            pending.append(positions)  # (set when the bits are read: see _pending)
            return False
        self._ready()
        if positions is None:
            positions = positions_in(item, f.m, f.k)
        rolled = False
        if self.rolling:
            cap = f.capacity
            if len(ids) >= cap:
                f._bits = self._next if self._next is not None else bytearray(f.n_bytes)
                self._next = None
                while len(ids) > self.keep:
                    ids.popleft()
                self.rolls += 1
                rolled = True
            if len(ids) >= cap - self.keep:
                nxt = self._next
                if nxt is None:
                    nxt = self._next = bytearray(f.n_bytes)
                for idx, mask in positions:
                    nxt[idx] |= mask
        ids.append(item)
        bits = f._bits  # f.add_positions(positions), inline
        for idx, mask in positions:
            bits[idx] |= mask
        return rolled

    def _ready(self) -> None:
        """Allocate the filter's bits if they are not yet, and set the pending additions' bits."""
        f = self.filter
        bits = f._bits
        if not bits:
            bits = f._bits = bytearray(f.n_bytes)
        if self._pending:
            for positions in self._pending:
                for idx, mask in positions:
                    bits[idx] |= mask
            self._pending = []

    def __contains__(self, item: str) -> bool:
        self._ready()
        return item in self.filter

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        """The ids the filter currently holds, oldest first (its full state)."""
        return list(self._ids)

    def load(self, ids: Iterable[str]) -> None:
        """Replace the content with ``ids`` (oldest first), e.g. when restoring state."""
        self._ids = deque()
        self.filter.clear()
        self._next = None
        self._pending = []
        for item in ids:
            self.add(item)

    def to_bytes(self) -> bytes:
        self._ready()
        return self.filter.to_bytes()

    def false_positive_rate(self) -> float:
        self._ready()
        return self.filter.false_positive_rate()

"""SDS-R timing and response-group functions, as @waku/sds 0.0.8 computes them.

``hash(x)`` is the first 8 bytes of SHA-256 of the UTF-8 string, read as a
big-endian unsigned 64-bit integer; ``hash(a, b)`` hashes the concatenation
``a + b``. ``T_resp`` multiplies two 64-bit values: the product is exact
(Python integers), as in @waku/sds's BigInt arithmetic — wrapping at 2**64
would disagree with every other implementation.
"""

from __future__ import annotations

from hashlib import sha256

__all__ = ["hash64", "t_req", "t_resp", "in_response_group", "response_groups_for"]

PARTICIPANTS_PER_RESPONSE_GROUP = 128


def hash64(text: str) -> int:
    return int.from_bytes(sha256(text.encode("utf-8")).digest()[:8], "big")


def t_req_offset(participant_id: str, message_id: str, t_min_ms: int, t_max_ms: int) -> int:
    span = t_max_ms - t_min_ms
    if span <= 0:
        return t_min_ms
    return hash64(participant_id + message_id) % span + t_min_ms


def t_req(participant_id: str, message_id: str, now_ms: int, t_min_ms: int, t_max_ms: int) -> int:
    """When ``participant_id`` should request a repair of ``message_id`` detected missing at ``now_ms``."""
    return now_ms + t_req_offset(participant_id, message_id, t_min_ms, t_max_ms)


def t_resp_offset(participant_id: str, sender_id: str, message_id: str, t_max_ms: int) -> int:
    if t_max_ms <= 0:
        return 0
    distance = hash64(participant_id) ^ hash64(sender_id)
    return (distance * hash64(message_id)) % t_max_ms


def t_resp(participant_id: str, sender_id: str, message_id: str, now_ms: int, t_max_ms: int) -> int:
    """When ``participant_id`` should answer a repair request for ``sender_id``'s ``message_id``.

    The original sender's distance is 0, so it answers at once.
    """
    return now_ms + t_resp_offset(participant_id, sender_id, message_id, t_max_ms)


def in_response_group(participant_id: str, sender_id: str | None, message_id: str, num_response_groups: int) -> bool:
    """Whether ``participant_id`` may answer repair requests for this message.

    Without a ``sender_id`` the group cannot be known: not eligible (as @waku/sds).
    """
    if not sender_id:
        return False
    if num_response_groups <= 1:
        return True
    return (hash64(participant_id + message_id) % num_response_groups) == (
        hash64(sender_id + message_id) % num_response_groups
    )


def response_groups_for(expected_participants: int) -> int:
    """The RFC's default: one response group per 128 participants (``n div 128 + 1``)."""
    return max(0, expected_participants) // PARTICIPANTS_PER_RESPONSE_GROUP + 1

"""Epoch keys sealed to members' X25519 keys: each box opens for its member only, in its epoch and channel."""

from __future__ import annotations

import os

import pytest

from sdschat.crypto import ChannelKey, Identity
from sdschat.crypto.epochs import (
    EpochKeyError,
    epoch_key,
    exchange_key,
    exchange_public,
    open_for_member,
    seal_to_members,
)


def test_each_member_opens_its_own_box_and_nothing_else() -> None:
    key = ChannelKey.generate("room")
    alice, bob, mallory = Identity.generate(), Identity.generate(), Identity.generate()
    secret = os.urandom(32)
    members = {i.participant_id: exchange_public(i) for i in (alice, bob)}
    eph, boxes = seal_to_members(secret, 3, key.channel_binding, members)
    assert set(boxes) == set(members)
    for ident in (alice, bob):
        assert open_for_member(ident, eph, boxes[ident.participant_id], 3, key.channel_binding) == secret
    # not sealed to mallory: no box opens for her, not even one "addressed" to her
    for box in boxes.values():
        with pytest.raises(EpochKeyError):
            open_for_member(mallory, eph, box, 3, key.channel_binding)
    # another epoch, another channel, a flipped bit, a short box: refused
    box = boxes[alice.participant_id]
    for args in (
        (eph, box, 4, key.channel_binding),
        (eph, box, 3, ChannelKey.generate("room").channel_binding),
        (eph, box[:-1] + bytes([box[-1] ^ 1]), 3, key.channel_binding),
        (eph, box[:20], 3, key.channel_binding),
        (os.urandom(32), box, 3, key.channel_binding),
    ):
        with pytest.raises(EpochKeyError):
            open_for_member(alice, *args)
    assert secret not in b"".join(boxes.values()) and secret not in eph


def test_the_exchange_key_follows_from_the_identity_and_the_epoch_key_keeps_the_name() -> None:
    ident = Identity.generate()
    assert exchange_public(ident) == exchange_public(Identity.from_private_bytes(ident.private_bytes()))
    assert exchange_public(ident) != exchange_public(Identity.generate())
    assert exchange_key(ident) is not None
    base = ChannelKey.generate("room")
    later = epoch_key(os.urandom(32), "room")
    assert later.topic != base.topic and later.channel_name == "room"
    with pytest.raises(ValueError):
        seal_to_members(b"short", 1, base.channel_binding, {})
    with pytest.raises(EpochKeyError):  # a low-order point announced as a member's key
        seal_to_members(os.urandom(32), 1, base.channel_binding, {"ab" * 16: bytes(32)})

"""Inbox requests: sealed to one member's X25519 key, signed by the asker, padded to the envelopes' buckets; a
blob that is not a request for us is refused with a reason, never anything else."""

from __future__ import annotations

import base64
import os

import pytest

from sdschat.crypto import (
    ChannelKey,
    Identity,
    InboxError,
    InboxRequest,
    inbox_topic,
    open_request,
    padded_size,
    seal_request,
)
from sdschat.crypto.epochs import exchange_public


def request_for(recipient: Identity, **kw) -> InboxRequest:
    fields = dict(
        kind="dm",
        channel="@alice+bob",
        secret=os.urandom(32),
        recipient=recipient.participant_id,
        nick="alice",
        sent_ms=1_700_000_000_000,
        broker="mqtt://example.org:1883",
        admins=(Identity.generate().participant_id,),
    )
    fields.update(kw)
    return InboxRequest(**fields)  # type: ignore[arg-type]


def test_a_request_opens_for_its_recipient_only_and_names_its_signer() -> None:
    alice, bob, carol = Identity.generate(), Identity.generate(), Identity.generate()
    request = request_for(bob, epoch=3, epoch_secret=os.urandom(32), removed=(carol.participant_id,))
    blob = seal_request(alice, request, exchange_public(bob))
    opened = open_request(bob, blob)
    assert opened.request == request and opened.sender == alice.participant_id
    with pytest.raises(InboxError) as refused:
        open_request(carol, blob)
    assert refused.value.reason == "auth"


def test_the_blob_shows_nothing_of_the_request_and_is_padded_to_a_bucket() -> None:
    alice, bob = Identity.generate(), Identity.generate()
    request = request_for(bob)
    blob = seal_request(alice, request, exchange_public(bob))
    assert len(blob) == padded_size(len(blob)) >= 1024
    secrets = [
        request.channel.encode(),
        request.nick.encode(),
        request.broker.encode(),
        request.secret,
        alice.public_bytes(),
        exchange_public(bob),
        bob.public_bytes(),
        request.request_id.encode(),
        bytes.fromhex(request.request_id),
        alice.participant_id.encode(),
        bytes.fromhex(alice.participant_id),
        bob.participant_id.encode(),
    ]
    for secret in secrets:
        for form in (secret, secret.hex().encode(), base64.b64encode(secret)):
            assert form not in blob
    # two requests of different lengths below 1 KB look alike
    longer = seal_request(alice, request_for(bob, channel="x" * 40, nick="y" * 40), exchange_public(bob))
    assert len(longer) == len(blob)


def test_the_inbox_topic_is_an_hkdf_of_the_public_key_unlike_any_channel_value() -> None:
    bob = Identity.generate()
    xpub = exchange_public(bob)
    topic = inbox_topic(xpub)
    assert topic.startswith("sdschat/") and len(topic) == len("sdschat/") + 32
    assert topic == inbox_topic(xpub) and topic != inbox_topic(exchange_public(Identity.generate()))
    hexpart = topic.removeprefix("sdschat/")
    assert hexpart not in (xpub.hex(), bob.participant_id, bob.public_bytes().hex())
    # the same 32 bytes as a channel secret give other topics (the HKDFs are domain-separated)
    assert topic not in {ChannelKey(xpub, name).topic for name in ("a", "@alice+bob", bob.participant_id)}


def test_a_damaged_request_is_refused_with_its_reason() -> None:
    alice, bob = Identity.generate(), Identity.generate()
    blob = seal_request(alice, request_for(bob), exchange_public(bob))
    for i in (0, 1, 40, len(blob) // 2, len(blob) - 1):
        bad = bytearray(blob)
        bad[i] ^= 0x01
        with pytest.raises(InboxError) as refused:
            open_request(bob, bytes(bad))
        assert refused.value.reason in ("version", "auth")
    for cut in (b"", blob[:10], blob[:-1]):
        with pytest.raises(InboxError):
            open_request(bob, cut)
    with pytest.raises(InboxError) as refused:
        open_request(bob, b"\x01" * (200 * 1024))
    assert refused.value.reason == "too_large"


def test_a_request_signed_for_someone_else_and_sealed_on_is_refused() -> None:
    """bob cannot hand carol a request alice signed for him: the signature is scoped to bob's key and names him."""
    alice, bob, carol = Identity.generate(), Identity.generate(), Identity.generate()
    for_bob = request_for(bob)
    resealed = seal_request(alice, for_bob, exchange_public(carol))  # (what bob could at most do: re-seal)
    with pytest.raises(InboxError) as refused:
        open_request(carol, resealed)
    assert refused.value.reason == "recipient"


def test_fields_are_checked_on_the_way_in() -> None:
    bob = Identity.generate()
    request = request_for(bob)
    good = request.to_json()
    assert InboxRequest.from_json(good) == request
    for bad in (
        good.replace(b'"kind":"dm"', b'"kind":"root"'),
        good.replace(b'"v":1', b'"v":2'),
        good.replace(b'"nick":"alice"', b'"nick":"al\\u0007ice"'),
        good.replace(b'"epoch":0', b'"epoch":5'),  # an epoch above 0 needs its secret
        good[:-2],
        b"\xff",
    ):
        with pytest.raises(InboxError) as refused:
            InboxRequest.from_json(bad)
        assert refused.value.reason == "format"

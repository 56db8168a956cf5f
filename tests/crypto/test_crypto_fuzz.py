"""Random input to the parsers raises only the documented exceptions."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdschat.crypto import (
    ChannelKey,
    EnvelopeError,
    Identity,
    SignatureError,
    open_signed_content,
    signed_content,
    verify,
)

KEY = ChannelKey(bytes(range(32)), "general")
IDENT = Identity.generate()
SAMPLE_ENVELOPE = KEY.seal(b"sample")
SAMPLE_SIGNED = signed_content(IDENT, KEY.channel_binding, b"sample")
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mutations(sample):
    """Random bytes, valid-looking prefixes, and mutated samples."""

    def mutate(args):
        position, value, cut = args
        data = bytearray(sample)
        data[position % len(data)] = value
        return bytes(data[: cut % (len(data) + 1)]) if cut else bytes(data)

    return st.one_of(
        st.binary(max_size=300),
        st.binary(max_size=300).map(lambda b: sample[:2] + b),
        st.binary(max_size=120).map(lambda b: sample[:97] + b),
        st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 400)).map(mutate),
    )


@FUZZ
@given(mutations(SAMPLE_ENVELOPE))
def test_open_raises_only_envelope_error(data):
    try:
        plaintext = KEY.open(data)
    except EnvelopeError as exc:
        assert exc.reason in EnvelopeError.REASONS
    else:
        assert data == SAMPLE_ENVELOPE and plaintext == b"sample"


@FUZZ
@given(mutations(SAMPLE_SIGNED))
def test_open_signed_content_raises_only_signature_error(data):
    try:
        result = open_signed_content(data, KEY.channel_binding)
    except SignatureError as exc:
        assert exc.reason in SignatureError.REASONS
    else:
        assert data == SAMPLE_SIGNED and result.participant_id == IDENT.participant_id


@FUZZ
@given(st.binary(max_size=40), st.binary(max_size=40), st.binary(max_size=80))
def test_verify_returns_false_for_random_input(pub, data, sig):
    """Random keys and signatures (of every length, the right ones included) never verify and never raise: a
    forgery by chance is out of reach, so True here is a bug."""
    assert verify(pub, data, sig) is False


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 64 * 8 - 1), st.binary(max_size=200))
def test_a_signature_verifies_only_for_its_key_and_its_data(data, bit, other):
    """The other half of the property above: without it, a ``verify`` that always said False would pass."""
    sig = IDENT.sign(data)
    pub = IDENT.public_bytes()
    assert verify(pub, data, sig) is True
    flipped = bytearray(sig)
    flipped[bit // 8] ^= 1 << (bit % 8)
    assert verify(pub, data, bytes(flipped)) is False
    assert verify(pub, other, sig) is (other == data)
    assert verify(Identity.from_private_bytes(bytes(32)).public_bytes(), data, sig) is False

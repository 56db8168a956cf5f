"""What the node hands its publisher: one frame to seal and publish, with why and under which keys.

The engine, the receive pipeline and the roster each queue frames (:class:`Outbound`); the node's publisher
task seals each under the channel's keys and publishes it, in the order queued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..crypto import ChannelKey

__all__ = ["Outbound"]


@dataclass(frozen=True, slots=True)
class Outbound:
    """One SDS frame to publish.

    ``reason`` is the engine's publish reason (``message``, ``ephemeral``, ``sync``, ``resend``, ``repair``);
    ``message_id`` names the message it carries, when the publisher needs it (to record its retrieval hint and
    pick its keys). ``keys``: the keys to seal it under, when the one who queued it knows better than the
    membership's rule (an admin message handed to a member still on an older key); None: that rule
    (:meth:`~sdschat.node.membership.Membership.seal_keys_for`).
    """

    data: bytes
    reason: str
    message_id: str | None = None
    keys: Sequence[ChannelKey] | None = None

"""Reaching someone by name, and being reached: ``/query NAME`` and ``sdschat dm NAME`` (a new two-member
channel), ``/invite NAME`` (the channel on screen), and the window's inbox where such requests arrive.

No token changes hands: the request (the channel's name and key, what an invite carries) is signed by us and
sealed to the X25519 key the other member announced in a channel we share, and published on that member's
inbox topic (:mod:`sdschat.crypto.inbox`; who counts as reachable: :mod:`sdschat.node.inbox`). The window
subscribes to its own inbox on the shared connection; a kept broker session keeps that subscription too, so a
request sent while the window is closed waits at the broker (QoS 1, never retained).

Who may invite by name: whoever may make an invite token (a member holding the channel's newest key, not
removed), to someone not in the channel and not removed from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import CliError

if TYPE_CHECKING:
    from sdschat.node.inbox import InboxReceiver

__all__ = ["DirectRequests", "RequestNotSent"]

#: requests that arrive before every channel's roster is loaded wait (unchecked) up to this many
MAX_EARLY = 100


class RequestNotSent(CliError):
    """The broker connection did not take the request (one line, exit 2)."""


class DirectRequests:
    """A :class:`~sdschat.cli.window.ProfileClient`'s inbox, and its requests by name."""

    def __init__(self, client) -> None:
        self.client = client
        self.receiver: InboxReceiver | None = None  # once listening
        self.topic = ""
        self._view = None
        self._handler: Callable[[object], None] | None = None
        self._shown: list = []  # requests to show, until the window takes them
        self._early: list[bytes] = []  # blobs that arrived before every roster was loaded
        self._ready = False

    # ------------------------------------------------------------ the inbox

    async def listen(self, identity) -> None:
        """Subscribe to our inbox topic on the shared connection."""
        from sdschat.crypto import inbox_topic
        from sdschat.crypto.epochs import exchange_public
        from sdschat.node.inbox import InboxReceiver

        self.receiver = InboxReceiver(identity, self.client.profile.inbox_seen())
        self.topic = inbox_topic(exchange_public(identity))
        view = self.client.shared.view()
        await view.start()
        view.set_message_handler(self._arrived)
        self._view = view
        with contextlib.suppress(Exception):  # (no answer yet: the subscription goes out once connected)
            await asyncio.wait_for(asyncio.shield(view.subscribe(self.topic)), 10)

    def ready(self) -> None:
        """Every channel has started: a request's asker can be looked up in every roster."""
        self._ready = True
        early, self._early = self._early, []
        for blob in early:
            self._arrived(self.topic, blob)

    @property
    def counts(self) -> dict[str, int]:
        """Requests dropped, by reason (see :class:`~sdschat.node.inbox.InboxReceiver`)."""
        return dict(self.receiver.counts) if self.receiver is not None else {}

    def on_request(self, handler: Callable[[object], None]) -> None:
        """``handler(opened)`` for each request to show (those that came before are handed over now)."""
        self._handler = handler
        shown, self._shown = self._shown, []
        for opened in shown:
            handler(opened)

    def _arrived(self, topic: str, payload: bytes) -> None:
        if self.receiver is None:
            return
        if not self._ready:
            if len(self._early) < MAX_EARLY:
                self._early.append(bytes(payload))
            else:
                self.receiver.counts["overflow"] += 1
            return
        opened = self.receiver.take(payload, self._is_contact)
        if opened is None:
            return
        with contextlib.suppress(Exception):  # (a profile folder gone read-only: shown again after a restart)
            self.client.profile.save_inbox_seen(self.receiver.seen)
        if opened.request.channel in self.client.profile.channels:  # (asked again, or invited where we are)
            self.receiver.counts["already"] += 1
            return
        if self._handler is not None:
            self._handler(opened)
        else:
            self._shown.append(opened)

    def _is_contact(self, pid: str) -> bool:
        from sdschat.node.inbox import contacts

        return pid in contacts(self.client.nodes)

    async def stop(self) -> None:
        if self._view is not None:
            await self._view.stop()
            self._view = None

    # ------------------------------------------------------------ asking

    async def query(self, name: str):
        """A two-member channel with the member called ``name`` (new, or the one we have): ``(node, contact,
        new)``; the request is sent either way (they may have missed or ignored the last one)."""
        from sdschat.node.inbox import contacts, dm_channel_name, resolve

        client, profile = self.client, self.client.profile
        contact = resolve(contacts(client.nodes), name)
        entry = profile.direct_channel(contact.participant_id)
        new = entry is None
        if entry is None:
            channel = dm_channel_name(profile.name, contact.nick or contact.name)
            if channel in profile.channels:  # (a channel with another member of that name)
                channel = f"{channel[: 40 - 5]}#{contact.participant_id[:4]}"
            me = profile.participant_id
            entry = profile.add_channel(
                channel, os.urandom(32), admins=sorted({me, contact.participant_id}), peer=contact.participant_id
            )
            node = await client.add(entry)
        else:
            node = next((n for n in client.nodes if n.key.channel_name == entry.name), None)
            if node is None:
                raise CliError(f"#{entry.name} has not started yet: try again in a moment")
        await self._send("dm", profile.invite(entry.name), contact)
        return node, contact, new

    async def invite(self, node, name: str):
        """The invite to ``node``'s channel sent to the member of another channel called ``name``: its
        :class:`~sdschat.node.inbox.Contact`. :class:`~sdschat.node.NotAllowed` (one line) if the channel's rules
        refuse it."""
        from sdschat.node import NotAllowed
        from sdschat.node.inbox import contacts, resolve

        channel = node.key.channel_name
        invite = self.client.invite_of(node)  # (NotAllowed for a member who cannot invite)
        contact = resolve(contacts(self.client.nodes), name)
        membership = node.membership
        if contact.participant_id in membership.removed:
            raise NotAllowed(f"{contact.name} was removed from #{channel}: an invite would admit nobody")
        if contact.participant_id in membership.others():
            raise NotAllowed(f"{contact.name} is in #{channel} already")
        await self._send("invite", invite, contact)
        return contact

    async def _send(self, kind: str, invite, contact) -> None:
        from sdschat.crypto import InboxRequest, inbox_topic, seal_request

        request = InboxRequest(
            kind=kind,
            channel=invite.channel,
            secret=invite.secret,
            recipient=contact.participant_id,
            nick=self.client.profile.name,
            sent_ms=int(time.time() * 1000),
            broker=invite.broker,
            admins=tuple(invite.admins),
            epoch=invite.epoch,
            epoch_secret=invite.epoch_secret,
            removed=tuple(invite.removed),
        )
        blob = seal_request(self.client.identity, request, contact.exchange_key)
        if not await self.client.shared.transport.publish(inbox_topic(contact.exchange_key), blob):
            raise RequestNotSent(f"not connected to the broker: the request to {contact.name} was not sent")

    async def accept(self, opened):
        """Join the channel ``opened`` (a shown request) hands us, as a token join would: ``(node, note)``."""
        from sdschat.profile import Invite

        r = opened.request
        invite = Invite(r.channel, r.secret, r.broker, r.admins, r.epoch, r.epoch_secret, r.removed)
        return await self.client.join_invite(invite, peer=opened.sender if r.kind == "dm" else "")

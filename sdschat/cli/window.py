"""Bare ``sdschat``: the profile's channels in one window (creating the profile on first run; with no
channel yet, a welcome that says how to start or join one)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .direct import DirectRequests
from .errors import CliError
from .logs import setup_logging
from .profiles import broker_failure, load_profile, profile_identity
from .wiring import profile_node_config, stop_all

if TYPE_CHECKING:
    from sdschat.profile.session import BrokerSession

__all__ = ["ProfileClient", "window_run", "first_run", "welcome"]

#: read positions (and the channel on screen) are written to the profile at most this often
READ_SAVE_S = 5.0


class ProfileClient:
    """The window's channels: one node per joined channel of the profile, all on one MQTT connection.

    Each node keeps its own SDS state, key, topic, database and store-node
    catch-up; they share the profile's identity and one connection (a
    :class:`~sdschat.transport.TopicView` each). Joins, parts, nick changes and
    what has been read go to the profile. Its inbox (:attr:`direct`, one more view
    of the connection) takes requests by name (``/query``, ``/invite NAME``).
    """

    def __init__(self, profile, shared, broker_url: str, embedded=None) -> None:
        self.profile = profile
        self.shared = shared
        self.broker_url = broker_url
        self._embedded = embedded
        self.nodes: list = []
        self._unread: dict[int, int] = {}
        #: per node, until its pane listens (:meth:`listening`): the news that arrived after its unread count was
        #: cut off, and the listener that gathers them
        self._since_count: dict[int, tuple[set[str], Callable[[], None]]] = {}
        self._told: dict[int, int] = {}  # per node: how many of those :meth:`unread` last counted in
        self._viewed = None
        self._save_at = 0.0  # when read positions may be written again (monotonic s)
        self._save_timer: asyncio.TimerHandle | None = None  # a pending write of read positions
        self._waiting: list = []  # channels whose nodes start_others() starts
        #: (channel, reason) of each channel that could not start while the window opened (a damaged database,
        #: say): start_others() reports them, the window opens on the channels that did
        self._not_started: list[tuple[str, str]] = []
        self._identity = None  # the profile's identity, read once
        self._session: BrokerSession | None = None  # the profile's kept broker session, if this window holds it
        self.direct = DirectRequests(self)

    @classmethod
    async def start(cls, profile, *, all_channels: bool = True) -> ProfileClient:
        """Connect and start the channels' nodes: all of them, or (``all_channels=False``, for a window that
        should open at once) only the first; :meth:`start_others` starts the rest."""
        from sdschat.crypto.keys import TOPIC_PREFIX
        from sdschat.profile.session import claim_session
        from sdschat.transport import MqttTransport, SharedConnection, resolve_broker

        url, embedded = await resolve_broker(profile.broker or None)
        # an external broker keeps the profile's session while the window is closed (an embedded one ends with
        # it): what is sent meanwhile waits at the broker and arrives when the window opens again. A broker
        # queues for an absent member only what was published at QoS 1: on an external broker every window
        # publishes so, whether it keeps a session or not
        session = claim_session(profile.paths.data) if embedded is None and profile.session_expiry_s else None
        qos = 1 if embedded is None else 0
        if session is not None:
            transport = MqttTransport(
                url, client_id=session.client_id, qos=qos, session_expiry_s=profile.session_expiry_s
            )
        else:  # a random client id: the broker learns nothing of who connects
            transport = MqttTransport(url, client_id=f"sdschat-{os.urandom(8).hex()}", qos=qos)
        shared = SharedConnection(
            transport, keep=lambda topic: topic.startswith(TOPIC_PREFIX), hold=session is not None
        )
        client = cls(profile, shared, url, embedded)
        client._session = session
        try:
            await shared.start()
            await client.direct.listen(client.identity)  # (before settled(): what a kept session queued is held)
            # the channel the window showed last starts first: the window opens on it (or, if it cannot start,
            # on the next one that can)
            entries = profile.opening_order() if not all_channels else list(profile.channels.values())
            first = await client._open_first(entries, all_channels)
            client._waiting = [e for e in entries if e not in first and e.name not in dict(client._not_started)]
            if all_channels:
                client.direct.ready()
                shared.settled()
        except BaseException:
            await client.stop()
            raise
        return client

    async def _open_first(self, entries: list, all_channels: bool) -> list:
        """Start ``entries`` (all of them), or the first that starts (the window opens on it, its engine
        restoring in the background so its history shows at once); the entries started. A channel that cannot
        start (its database damaged, say) is kept in :attr:`_not_started` for the window to report, unless none
        starts, or all were to: then its error is raised (the window does not open). A :class:`CliError` is the
        profile's, not a channel's: raised at once. (The identity was read before: its errors are no channel's.)"""
        first_error: Exception | None = None
        started: list = []
        for batch in [entries] if all_channels else [[e] for e in entries]:
            nodes = await asyncio.gather(
                *(self._start(e, background=not all_channels) for e in batch), return_exceptions=True
            )
            for entry, node in zip(batch, nodes):
                if isinstance(node, Exception) and not isinstance(node, CliError):
                    self._not_started.append((entry.name, str(node)))
                    first_error = first_error or node
                elif isinstance(node, BaseException):
                    raise node
                else:
                    self.nodes.append(node)
                    await self._count_unread(node, entry)
                    started.append(entry)
            if started and not all_channels:
                break
        if first_error is not None and (all_channels or not started):
            raise first_error
        return started

    async def start_others(self, started: Callable[[object], None], failed: Callable[[str, str], None]) -> None:
        """Start the channels :meth:`start` left for later, one at a time (a long history takes its engine a
        while to restore), calling ``started(node)`` for each, or ``failed(channel, reason)`` (first for those
        that could not start as the window opened)."""
        from sdschat.ui.collector import long_lived_from_here

        for name, reason in self._not_started:
            failed(name, reason)
        self._not_started = []
        for node in list(self.nodes):  # one engine restoring at a time: the first channel's, then the others
            with contextlib.suppress(Exception):
                await node.wait_ready()
        while self._waiting:
            entry = self._waiting.pop(0)
            if entry.name not in self.profile.channels:  # parted meanwhile
                continue
            try:
                node = await self._start(entry)
            except Exception as exc:  # one damaged channel does not keep the others away
                failed(entry.name, str(exc))
                continue
            await self._count_unread(node, entry)
            self.nodes.append(node)
            order = {name: i for i, name in enumerate(self.profile.channels)}  # window order is the profile's
            self.nodes.sort(key=lambda n: order.get(n.key.channel_name, len(order)))
            started(node)
        self.direct.ready()
        self.shared.settled()  # (what a kept session brought for a channel no longer ours is dropped)
        long_lived_from_here()  # (the channels' logs live as long as the window)

    @property
    def identity(self):
        """The profile's identity, read once, before the window takes the terminal (a protected one asks)."""
        if self._identity is None:
            self._identity = profile_identity(self.profile)
        return self._identity

    async def _start(self, entry, *, background: bool = False):
        from sdschat.node import Node

        node = await Node.start(
            profile_node_config(
                self.profile, entry, broker_url=self.broker_url, transport=self.shared.view(), identity=self.identity
            ),
            restore_in_background=background,
        )
        if entry.invite_epoch is not None:  # the database holds it now
            self.profile.adopted_epoch(entry.name)
        return node

    def opening(self):
        """The node the window opens on: the channel it showed last (if started), else the first."""
        active = self.profile.active
        return next((n for n in self.nodes if n.key.channel_name == active), self.nodes[0] if self.nodes else None)

    async def _count_unread(self, node, entry) -> None:
        """What :meth:`unread` says for ``node``: the messages of others that arrived since the channel was last
        read, and each one that arrives until its pane listens (:meth:`listening`). What arrived before the
        listener is in the database once the node's writer is flushed; what arrives after is heard, and left
        out of the database's count (a commit may bring it there before the count is read): none is counted
        twice or missed."""
        from sdschat.node import events as ev

        arrived: set[str] = set()

        def heard(event) -> None:
            if type(event) is ev.MessageShown:
                m = event.message
                if not m.own and m.kind not in ev.QUIET_KINDS:
                    arrived.add(m.message_id)

        self._since_count[id(node)] = (arrived, node.add_listener(heard))
        self._unread[id(node)] = await node.unread_since(entry.read_ms, but=arrived)

    def unread(self, node) -> int:
        """Messages of others that arrived in ``node``'s channel since it was last read (up to when its pane
        began listening: the pane counts from there)."""
        arrived = self._since_count.get(id(node))
        if arrived is not None:
            self._told[id(node)] = len(arrived[0])
        return self._unread.get(id(node), 0) + (len(arrived[0]) if arrived is not None else 0)

    def listening(self, node) -> int:
        """``node``'s pane listens now: the count stops gathering (the pane counts what comes from here, with not
        one message in between); how many arrived since :meth:`unread` was last read (what its row lacks)."""
        arrived, stop = self._since_count.pop(id(node), (set(), lambda: None))
        stop()
        self._unread[id(node)] = self._unread.get(id(node), 0) + len(arrived)
        return len(arrived) - self._told.pop(id(node), 0)

    @property
    def notifications(self):
        """How mentions are told (the profile's ``[notifications]``: ``bell``, ``desktop``)."""
        return self.profile.notifications

    def _entry(self, node):
        return self.profile.channels.get(node.key.channel_name)

    def muted(self, node) -> bool:
        entry = self._entry(node)
        return entry is not None and entry.muted

    def set_muted(self, node, muted: bool) -> None:
        self.profile.set_muted(node.key.channel_name, muted)

    def read_ms(self, node) -> int:
        """When ``node``'s channel was last on screen (wall-clock ms; 0: never)."""
        entry = self._entry(node)
        return entry.read_ms if entry is not None else 0

    def viewing(self, node) -> None:
        """``node``'s channel is now the one on screen: the window reopens on it."""
        self._viewed = node
        if node in self.nodes and self._entry(node) is not None:
            self.profile.set_active(node.key.channel_name)
            self._save_soon()

    def read(self, node) -> None:
        """Everything that arrived in ``node``'s channel until now has been on screen (the person is at its end):
        its read position moves, so ``sdschat channels`` agrees with the window. Written at most every
        :data:`READ_SAVE_S` seconds (a busy channel read live moves it with every line), and on :meth:`stop`."""
        if node in self.nodes and self._entry(node) is not None:
            if self.profile.mark_read(node.key.channel_name, int(time.time() * 1000), save=False):
                self._save_soon()

    def _save_soon(self) -> None:
        if self._save_timer is not None:
            return
        wait = self._save_at - time.monotonic()
        if wait <= 0:
            self._save()
        else:
            self._save_timer = asyncio.get_running_loop().call_later(wait, self._save)

    def _save(self) -> None:
        self._save_timer = None
        self._save_at = time.monotonic() + READ_SAVE_S
        with contextlib.suppress(Exception):  # (a profile folder gone read-only must not end the window)
            self.profile.save_channels()

    async def join(self, text: str):
        """``text`` is an invite token (``sdschat:...``) or the name of a new channel: ``(node, note)``, the note
        saying what the person should know (an invite naming another broker than this window's), or ``""``."""
        from sdschat.profile import TOKEN_PREFIX, decode_invite

        if text.startswith(TOKEN_PREFIX):
            return await self.join_invite(decode_invite(text))
        return await self.add(self.profile.add_channel(text, os.urandom(32))), ""

    async def join_invite(self, invite, *, peer: str = ""):
        """Join the channel of ``invite`` (an :class:`~sdschat.profile.Invite`, from a token or a request by name):
        ``(node, note)`` as :meth:`join`. ``peer``: the other member of a two-member channel."""
        entry = self.profile.add_channel(
            invite.channel,
            invite.secret,
            admins=invite.admins,
            epoch=(invite.epoch, invite.epoch_secret),
            removed=invite.removed,
            peer=peer,
        )
        note = ""
        if invite.broker and invite.broker != self.broker_url:
            note = (
                f"the invite names broker {invite.broker}; this window is on {self.broker_url} "
                f"(set broker in {self.profile.paths.profile_file} to change it)"
            )
        return await self.add(entry), note

    async def add(self, entry):
        """Start the node of ``entry``, a channel just added to the profile (taken out again if it cannot start)."""
        try:
            node = await self._start(entry)
        except BaseException:
            self.profile.remove_channel(entry.name, forget=True)
            raise
        self.nodes.append(node)
        return node

    async def query(self, name: str):
        """``/query NAME``: a two-member channel with that member of one of our channels, asked by name (see
        :mod:`sdschat.cli.direct`): ``(node, contact, new)``."""
        return await self.direct.query(name)

    async def invite_by_name(self, node, name: str):
        """``/invite NAME``: ``node``'s channel's invite sent to that member's inbox; the contact it went to."""
        return await self.direct.invite(node, name)

    async def accept(self, opened):
        """Accept a request shown by the window: join its channel (``(node, note)``)."""
        return await self.direct.accept(opened)

    def on_request(self, handler) -> None:
        """``handler(opened)`` for each request by name to show (``opened.request``, ``opened.sender``)."""
        self.direct.on_request(handler)

    def inbox_dropped(self) -> dict[str, int]:
        """Requests by name that reached our inbox and were dropped, by reason (``/stats``)."""
        return self.direct.counts

    def contact_name(self, pid: str) -> str:
        """How a member of our channels is shown (its id's start if none of our channels knows it)."""
        from sdschat.node.inbox import contacts

        found = contacts(self.nodes).get(pid)
        return found.name if found is not None else pid[:8]

    async def part(self, node) -> None:
        """Leave ``node``'s channel: the others are told (``* bob left``), then it stops and leaves the profile."""
        self.nodes.remove(node)
        await node.leave()
        await node.stop()
        self.profile.remove_channel(node.key.channel_name)

    def invite(self, node) -> str:
        """A token for ``node``'s channel; :class:`~sdschat.node.NotAllowed` (one line) if an invite of ours would
        admit nobody."""
        from sdschat.profile import encode_invite

        return encode_invite(self.invite_of(node))

    def invite_of(self, node):
        """What an invite to ``node``'s channel carries (:class:`~sdschat.profile.Invite`); :class:`NotAllowed`
        (one line) if an invite of ours would admit nobody."""
        from sdschat.node import NotAllowed

        refused = node.membership.invite_refusal()
        if refused is not None:
            raise NotAllowed(f"no invite: {refused}")
        current = node.membership.current
        return self.profile.invite(
            node.key.channel_name,
            admins=node.membership.admins,
            epoch=(current.number, current.secret),
            removed=node.membership.removed,
        )

    def set_nick(self, nick: str) -> None:
        for node in self.nodes:
            if node.nick != nick:
                node.set_nick(nick)
        self.profile.name = nick
        self.profile.save()

    async def stop(self) -> None:
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        if self._save_at:  # (a window that changed nothing writes nothing)
            self._save()
        self.shared.closing()  # (the channels' subscriptions stay at the broker: a kept session queues for them)
        await stop_all(self.nodes)
        with contextlib.suppress(Exception):
            await self.direct.stop()
        await stop_all([self.shared])
        if self._session is not None:
            self._session.release()
        if self._embedded is not None:
            with contextlib.suppress(Exception):
                await self._embedded.close()


def first_run(args: argparse.Namespace):
    """The profile; on first run, ask for a name on the terminal and create it (with no channel: the person
    chooses the first one, :func:`welcome`)."""
    from sdschat.profile import Profile, resolve_paths

    paths = resolve_paths(getattr(args, "home", None))
    if not Profile.exists(paths):
        if not sys.stdin.isatty():
            raise CliError("no profile yet: run `sdschat init --name NAME` (no terminal to ask on)")
        print(f"sdschat: no profile at {paths.profile_file}; let's make one.", file=sys.stderr)
        try:
            name = input("your name: ").strip()
        except (EOFError, KeyboardInterrupt):
            raise CliError("no profile created") from None
        Profile.create(paths, name)
    return load_profile(args)


def welcome(profile) -> str:
    """What bare ``sdschat`` says to a profile in no channel yet: how to start one or join one."""
    return (
        f"Welcome to sdschat, {profile.name}. You are in no channel yet:\n"
        "  sdschat new NAME      start a channel (then `sdschat invite NAME` makes an invite to send)\n"
        "  sdschat join TOKEN    join one with the invite someone sent you ('sdschat:...')\n"
        "then run `sdschat` again: every channel in one window. To watch it work first: `sdschat demo --bots`."
    )


async def window_run(args: argparse.Namespace) -> int:
    from sdschat.store import StoreError
    from sdschat.transport import TransportError
    from sdschat.ui.window import ChannelWindow

    if not sys.stdout.isatty():
        raise CliError("sdschat needs a terminal (stdout is not a tty); for scripts use `sdschat bot`")
    profile = first_run(args)
    if getattr(args, "log_file", None) is None:  # a profile made just now: the log moves into its data folder
        setup_logging(args)
    if not profile.channels:  # nothing to open: say how to start or join a channel, never pick one for them
        print(welcome(profile))
        return 0
    try:
        client = await ProfileClient.start(profile, all_channels=False)  # the rest start once the window is up
    except (TransportError, StoreError) as exc:
        raise broker_failure(exc, profile.broker) from None  # a refusal for want of a login says how to give one
    try:
        app = ChannelWindow(client)
        await app.run_async()
    finally:
        await client.stop()
    failures = [f"#{n.key.channel_name}: {n.failure}" for n in client.nodes if n.failure]
    if failures:
        raise CliError("; ".join(failures), code=1)
    return int(app.return_code or 0)

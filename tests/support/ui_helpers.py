"""Helpers of the UI tests: real nodes over an embedded broker, a fixed-data node for snapshots."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass, field, replace
from datetime import UTC
from pathlib import Path

from node_helpers import missed_by

from sdschat.node import events as ev

T0_MS = 1_763_805_600_000  # 2025-11-22 10:00:00 UTC
UTC = UTC


def fast_config(**overrides):
    """Engine timings shrunk so acks, resends and repairs happen within a second or two."""
    from sdschat.node import node_channel_config

    base = dict(
        resend_unacknowledged_ms=800,
        resend_possibly_acknowledged_ms=2_000,
        ack_delay_ms=50,
        ack_jitter_ms=100,
        sync_interval_ms=1_000,
        sync_jitter_ms=300,
        repair_t_min_ms=300,
        repair_t_max_ms=1_500,
    )
    base.update(overrides)
    return node_channel_config(**base)


@contextlib.asynccontextmanager
async def cluster(
    tmp_path: Path,
    nicks=("alice", "bob"),
    configs: dict | None = None,
    channel: str = "general",
    key=None,
    admin: str | None = None,
):
    """Start an embedded broker and one real node per nick (shared in-memory key); stop everything after. With
    ``admin`` (one of the nicks), the nodes keep the channel's membership and that nick is its admin."""
    from sdschat.crypto import ChannelKey, Identity
    from sdschat.node import Node, NodeConfig
    from sdschat.transport import EmbeddedBroker

    configs = configs or {}
    broker = await EmbeddedBroker.start()
    key = key or ChannelKey.generate(channel)
    identities = {nick: Identity.generate() for nick in nicks} if admin is not None else {}
    members = {"membership": True, "admins": (identities[admin].participant_id,)} if admin is not None else {}
    nodes = []
    try:
        for nick in nicks:
            cfg = configs.get(nick) or fast_config()
            config = NodeConfig(
                nick,
                key,
                tmp_path / f"{nick}.db",
                broker.url,
                channel_config=cfg,
                identity=identities.get(nick),
                **members,
            )
            nodes.append(await Node.start(config))
        yield nodes
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                await node.stop()
        await broker.close()


@contextlib.asynccontextmanager
async def twin_of(node, folder: Path):
    """A second participant in ``node``'s channel going by its nick (an identity and a database of its own, the same
    settings); stopped after."""
    from sdschat.node import Node, NodeConfig

    twin = await Node.start(
        NodeConfig(node.nick, node.key, folder / "twin.db", node.broker_url, channel_config=node.config.channel_config)
    )
    try:
        yield twin
    finally:
        await twin.stop()


async def wait_until(
    pilot, predicate, timeout: float = 6.0, step: float = 0.05, what: str = "condition", describe=None
):
    """Until ``predicate()`` holds; else an AssertionError naming ``what`` (and, given ``describe``, what it
    returns then: the state a failure on a loaded CI machine is read from)."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(step)
        if predicate():
            return
        if time.monotonic() > deadline:
            state = f"; {describe()}" if describe is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{state}")


async def wait_until_node(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Until ``predicate()`` holds (a node's state, no Pilot: before or beside a window); else an AssertionError
    naming ``what``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.02)


def lines_of(app, pane=None) -> list[str]:
    """Every line of the pane's message history as the screen paints it."""
    pane = pane or app.active_pane()
    return [line.replace("\u00a0", " ") for line in pane.view.all_text()]


def widget_text(widget) -> str:
    """What a (non-scrolling) widget paints, as text."""
    return "\n".join(widget.render_line(y).text.rstrip() for y in range(widget.size.height))


def line_with(lines: list[str], needle: str) -> str | None:
    return next((line for line in lines if needle in line), None)


# ------------------------------------------------------------ fixed data


@dataclass
class FakeImpairment:
    loss_in: float = 0.0
    loss_out: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    duplicate: float = 0.0
    offline: bool = False


@dataclass
class FakeKey:
    channel_name: str = "general"


@dataclass
class FakeParticipant:
    participant_id: str
    nick: str | None
    first_seen_ms: int
    last_seen_ms: int


ALICE = "a1" * 16
BOB = "b0" * 16
CAROL = "c4" * 16


def fixed_messages() -> list[ev.ChatMessage]:
    """A history with every state the view can show (no wall clock anywhere)."""

    def m(i, sender, nick, text, lamport, state, minute, own=False, kind="msg", acks=0, repaired=False, re=None):
        return ev.ChatMessage(
            f"{i:02d}" + "0" * 62,
            sender,
            nick,
            text,
            kind,
            T0_MS + minute * 60_000 - 86_400_000 * (i == 1),
            lamport,
            own,
            state,
            acks,
            0,
            repaired,
            reply_to=re and f"{re:02d}" + "0" * 62,
        )

    return [
        m(1, BOB, "bob", "yesterday's last word", 1, ev.RECEIVED, 0),
        m(2, ALICE, "alice", "morning! shipping the SDS chat today", 2, ev.ACKNOWLEDGED, 1, own=True),
        m(3, CAROL, "carol", "nice. does it show what got lost?", 3, ev.RECEIVED, 2),
        m(
            4,
            BOB,
            "bob",
            "it shows what is *possibly* missing, then repairs it in place — long lines wrap under "
            "the text column so the nick column stays readable",
            4,
            ev.RECEIVED,
            3,
        ),
        m(5, ALICE, "alice", "watch this one", 5, ev.POSSIBLY_ACKNOWLEDGED, 4, own=True, acks=2),
        m(6, ALICE, "alice", "and this one is still in flight", 6, ev.UNACKNOWLEDGED, 5, own=True),
        m(7, ALICE, "alice", "resending…", 7, ev.RESENDING, 6, own=True),
        m(9, CAROL, "carol", "this arrived before the message it follows", 9, ev.WAITING, 7),
        m(10, ALICE, "alice", "waves", 10, ev.SENDING, 8, own=True, kind="me"),
        m(12, BOB, "bob", "and this one waited on a message nobody had", 12, ev.RECEIVED, 9),
        m(13, CAROL, "carol", "so the marker is the honest part", 13, ev.RECEIVED, 10, re=4),
    ]


def fixed_gaps() -> list[ev.GapOpened]:
    """What ``node.open_gaps()`` says of :func:`fixed_messages`: carol's message 09 waits for one of bob's."""
    return [ev.GapOpened("09" + "0" * 62, ("x1" * 32,), (BOB,))]


def fixed_events() -> list[ev.NodeEvent]:
    """Applied after the history: a gap, a repair (highlighted), a loss."""
    repaired = ev.ChatMessage(
        "08" + "0" * 62,
        BOB,
        "bob",
        "I was missing, then repaired by carol",
        "msg",
        T0_MS + 7 * 60_000,
        8,
        False,
        ev.RECEIVED,
        0,
        0,
        True,
        CAROL,
    )
    return [
        ev.GapOpened("09" + "0" * 62, ("x1" * 32,), (BOB,)),
        ev.MessageShown(repaired),
        ev.MessageRepaired(repaired.message_id, "sds-r", CAROL),
        ev.GapOpened("12" + "0" * 62, ("11" + "0" * 62,), (CAROL,)),
        ev.MessageLost("11" + "0" * 62, CAROL, ("12" + "0" * 62,)),
        ev.GapClosed("12" + "0" * 62, ("11" + "0" * 62,)),
    ]


@dataclass
class FakeNode:
    """Just enough of :class:`sdschat.node.Node` for deterministic snapshots (no network, no clock)."""

    nick: str = "alice"
    participant_id: str = ALICE
    key: FakeKey = field(default_factory=FakeKey)
    broker_url: str = "mqtt://127.0.0.1:1883"
    stored: list = field(default_factory=fixed_messages)
    impairment: FakeImpairment = field(default_factory=FakeImpairment)
    failure: str | None = None
    sent: list = field(default_factory=list)
    gaps: list = field(default_factory=lambda: fixed_gaps())
    #: as Node.removed_me: a member an admin removed
    removed_me: bool = False
    #: as Node.online_since_ms: connected before every fixed message was written (all of them are live traffic)
    online_since_ms: int = 1

    def messages(self):
        return list(self.stored)

    def open_gaps(self):
        return list(self.gaps)

    async def history(self, *, limit=None, before=None, after=None):  # as Node.history: in order, or one page
        if after is not None:
            return [m for m in self.stored if (m.lamport_timestamp, m.message_id) > after][:limit]
        older = [m for m in self.stored if before is None or (m.lamport_timestamp, m.message_id) < before]
        return older if limit is None else older[-limit:]

    async def message(self, message_id):
        return next((m for m in self.stored if m.message_id == message_id), None)

    async def search(self, query, *, limit=50, before=None):  # as Node.search, over the fixed messages
        from sdschat.node import SearchHit, match_spans
        from sdschat.store import fts_query, query_terms

        fts_query(query)  # the same one-line refusals
        terms = query_terms(query)
        hits = []
        for i, m in enumerate(self.stored):
            spans = match_spans(m.text, terms)
            if spans:
                hits.append(SearchHit(self.key.channel_name, m, i + 1, tuple(spans)))
        return hits[::-1][:limit]

    def participants(self):
        return [
            FakeParticipant(BOB, "bob", T0_MS, T0_MS + 9 * 60_000),
            FakeParticipant(CAROL, "carol", T0_MS, T0_MS + 5 * 60_000),
        ]

    def health(self):
        return {
            "lamport_timestamp": 12,
            "log": 9,
            "unacknowledged": 1,
            "possibly_acknowledged": 1,
            "incoming": 0,
            "missing": 1,
            "repair_requests": 1,
            "repair_responses": 0,
            "resends": 3,
            "repairs_requested": 2,
            "repairs_served": 1,
            "lost": 1,
            "undecryptable": 0,
            "rejected": 0,
            "connection": "connected",
        }

    def add_listener(self, listener):
        return lambda: None

    def set_nick(self, nick):
        self.nick = nick

    def set_impairment(self, **settings):
        self.impairment = replace(self.impairment, **settings)

    async def send_text(self, text, kind="msg"):
        self.sent.append((kind, text))
        return "x"

    async def send_typing(self):
        pass

    def pending(self):
        return False


FIXED_NOW = (T0_MS + 10 * 60_000) / 1000


@dataclass
class FakeClient:
    """Just enough of the window's client (:class:`sdschat.cli.window.ProfileClient`) for snapshots."""

    nodes: list
    unread_at_start: dict = field(default_factory=dict)
    notifications: object = None
    viewed: list = field(default_factory=list)

    def unread(self, node) -> int:
        return self.unread_at_start.get(node.key.channel_name, 0)

    def read_ms(self, node) -> int:
        return 0

    def opening(self):
        return self.nodes[0] if self.nodes else None

    def read(self, node) -> None:
        pass  # (nothing is saved)

    def muted(self, node) -> bool:
        return False

    def viewing(self, node) -> None:
        self.viewed.append(node.key.channel_name)

    async def start_others(self, started, failed) -> None:
        pass  # every node is there from the start


# ------------------------------------------------------------ profiles


def channel_secret(name: str) -> bytes:
    """The key of channel ``name`` in every test profile: the same name is the same channel for everyone."""
    return hashlib.sha256(b"sdschat test channel " + name.encode()).digest()


class Profiles:
    """Test profiles on one embedded broker (see :func:`profiles`): ``group["alice"]``, and their clients."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.by_name: dict = {}
        self._clients: list = []

    def __getitem__(self, who: str):
        return self.by_name[who]

    async def client(self, profile, **options):
        """``ProfileClient.start(profile, **options)``, stopped when the group ends (if the test has not)."""
        from sdschat.cli.window import ProfileClient

        client = await ProfileClient.start(profile, **options)
        self._clients.append(client)
        return client


@contextlib.asynccontextmanager
async def profiles(tmp_path: Path, **channels):
    """An embedded broker and one profile per keyword (``alice=("team", "ops")``) under ``tmp_path``, each in
    the channels named; the clients started through the group and the broker are stopped after."""
    from sdschat.cli.wiring import stop_all
    from sdschat.profile import Profile, resolve_paths
    from sdschat.transport import EmbeddedBroker

    broker = await EmbeddedBroker.start()
    group = Profiles(broker)
    try:
        for who, names in channels.items():
            profile = Profile.create(resolve_paths(tmp_path / who), who, broker.url)
            # (the broker lives in the test: no session to keep across windows, and no MQTT 5 probe at every
            # start; tests/cli/test_cli_kept_session.py tries kept sessions on mosquitto)
            profile.session_days = 0
            profile.save()
            for name in names:
                profile.add_channel(name, channel_secret(name))
            group.by_name[who] = profile
        yield group
    finally:
        await stop_all(reversed(group._clients))
        await broker.close()


async def received_while_away(profile, channel: str, sender, texts: list[str], timeout: float = 10.0) -> None:
    """While no window is open, a headless node of ``profile``'s ``channel`` (as ``sdschat bot`` runs one)
    receives ``texts`` from ``sender``'s node; returns once it has them all (or ``timeout`` passed)."""
    from sdschat.cli.wiring import profile_node_config
    from sdschat.node import Node

    headless = await Node.start(profile_node_config(profile, profile.channel(channel)))
    try:
        for text in texts:
            await sender.send_text(text)
        deadline = time.monotonic() + timeout
        while (
            len([m for m in headless.messages() if m.kind == "msg"]) < len(texts)  # (joins aside)
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.05)
    finally:
        await headless.stop()


def capture_writes(app) -> list[str]:
    """Everything the app writes to its terminal from now on (escape sequences included), as it goes."""
    writes: list[str] = []
    real_write = app._driver.write

    def write(data: str) -> None:
        writes.append(data)
        real_write(data)

    app._driver.write = write
    return writes


async def open_inspector(pilot, app, message_id: str):
    """Move the message cursor up to ``message_id`` and press ``i``: the inspector panel on it."""
    from sdschat.ui.screens.inspector import InspectorScreen

    await pilot.press("up")
    view = app.pane.view
    while view.cursor.msg.message_id != message_id:
        await pilot.press("up")
    await pilot.press("i")
    assert isinstance(app.screen, InspectorScreen)
    return app.screen


async def slash(pilot, app, command: str, screen_type):
    """Type ``command`` (``/gaps``, ``/members``, ...) in the active pane and press Enter: the screen it opens,
    checked to be a ``screen_type``."""
    app.pane.input.load_text(command)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, screen_type), what=command)
    return app.screen


async def repaired_by_third(pilot, receiver, author, third, text: str) -> str:
    """``receiver`` misses ``author``'s ``text``; the author goes offline, so only ``third`` can answer the repair
    that ``third``'s next message (naming it) sets off. The message id, once ``receiver`` has it."""
    missed = await missed_by(receiver, author, text, pause=0, pilot=pilot, restore=False)
    await wait_until(pilot, lambda: missed in third.channel.log, what="the third member has it")
    author.set_impairment(offline=True)  # only the third member can repair it
    receiver.set_impairment(loss_in=0.0)
    await third.send_text("names it")
    await wait_until(pilot, lambda: missed in receiver.channel.log, timeout=20, what="the repair")
    return missed

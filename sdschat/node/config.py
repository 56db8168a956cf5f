"""What a node is started with: :class:`NodeConfig`, and the engine settings nodes use."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..crypto import ChannelKey, Identity
from ..sds import ChannelConfig, RepairConfig
from ..sds.config import response_groups_for
from ..storenode import protocol as store_proto
from ..transport import Transport

__all__ = [
    "AWAY_AFTER_MS",
    "BEAT_EVERY_MS",
    "BLOOM_CAPACITY",
    "COMMIT_WITHIN_MS",
    "LOG_WINDOW",
    "NODE_REPAIR",
    "REPAIR_TIERS",
    "NodeConfig",
    "node_channel_config",
    "repair_for_members",
]

#: log rows a node's engine keeps in memory per channel (the rest: 8 bytes an id; every row stays in the database)
LOG_WINDOW = 10_000
#: the ids a node's bloom filter holds before it rolls over (then it keeps the newest half): 248 bytes in every
#: frame at 0.1% false positives, against @waku/sds's 10,000 (18.7 KB). See ``node_channel_config``.
BLOOM_CAPACITY = 128
#: SDS-R as a node runs it in a small group (every node's default; see ``node_channel_config``)
NODE_REPAIR = RepairConfig(t_min_ms=2_000, t_max_ms=10_000, t_min_growth=1.0)
#: the repair timers by the channel's member count: (members from, T_min ms, T_max ms), smallest first
#: (docs/sds-at-scale.md, "Recommendations"; see :func:`repair_for_members`)
REPAIR_TIERS = ((1, NODE_REPAIR.t_min_ms, NODE_REPAIR.t_max_ms), (100, 5_000, 120_000), (1_000, 5_000, 60_000))
#: a member that published nothing for this long sends a presence beat (:mod:`.presence`)
BEAT_EVERY_MS = 180_000
#: away on its own after this long without a key pressed (0: never)
AWAY_AFTER_MS = 10 * 60_000
#: the longest a received message waits to be written with others (``NodeConfig.commit_within_ms``). 0: the
#: next loop turn: 3 nodes each sending 16 lines a second made 1.34 commits a line they sent or received (each
#: receipt, each send, and the retrieval hint a publish writes). 100 ms: a busy channel's receipts ride along
#: with the next publish's commit (which commits everything pending first): 0.35 a line; a quiet channel
#: writes a line 100 ms after it came. Nothing is acknowledged before it is written, so a crash in those
#: 100 ms loses nothing another member cannot repair. CPU: the README's performance table (bench/node_latency.py)
COMMIT_WITHIN_MS = 100.0


def repair_for_members(members: int) -> RepairConfig:
    """SDS-R for a channel of ``members`` members (the node itself included), as docs/sds-at-scale.md recommends.

    Decisions, by the study's findings (``Recommendations``):

    * Fewer than 100 members: T_min 2 s, T_max 10 s (:data:`NODE_REPAIR`), not the study's 30 s / 120 s for
      10 members. A small group waits longest for SDS-R (finding 2), and chat lines must show within seconds;
      catching up after an absence is the store node's or the broker's kept session's (findings 4 and 8), and
      ``t_min_growth`` 1 keeps a returning member's many requests back meanwhile (finding 16).
    * 100 to 999 members: T_min 5 s, T_max 120 s. 5 s rather than 30 s gives ordered delivery 3.1x sooner
      without a store for the same repair traffic (findings 3 and 10), and when a store loses or is down
      (finding 13); the window is widened from 10 s to the 120 s the study measured at this size, so that the
      timers of the many members missing the same message spread out and the earliest one serves all (finding 2).
    * 1,000 members and more: T_min 5 s, T_max 60 s: with this many members the earliest timer fires near T_min
      anyway, and T_max 60 s cuts delivered p99 14-52% for the same repair frames (finding 11); measured at
      1,000 and used for 10,000 and 100,000 too.
    * Response groups: the RFC's ``n div 128 + 1`` (:func:`~sdschat.sds.config.response_groups_for`), so 1 up
      to 127 members. Each member caches and answers only the messages of its group, so fewer answers race for
      the same request. The study's runs used the RFC's groups at every size (the simulator's default), so the
      timers above were measured with them. The engine applies them safely on a running channel: they decide
      only which messages this member caches and answers from then on, and the original sender is in every
      group of its own messages.
    * Members who for a moment count the channel differently (a join still on its way) run different timers
      or groups until they agree: both only decide when each member asks and answers, never what is sent or
      accepted, so the group works on meanwhile. Repair settings a node is given explicitly (``--tune
      repair_t_max_ms=...``) are kept at every size (:attr:`NodeConfig.follows_size`).
    * ``t_min_growth`` stays 1 at every size: a node's members catch up from a store node or a kept broker
      session (finding 16: without either, a large lossy group delivers sooner with 0).

    The bloom filter is not in here: it stays :data:`BLOOM_CAPACITY` (128) ids at every size. Finding 17 (the
    rollover grid: a long-lived 100-member channel, 20 messages a second) found a 128-id filter forgets no
    acknowledgement that mattered against 10,000, for 11.7x fewer bytes: causal histories acknowledge a message
    within a second, and an owed acknowledgement a filter forgot is named in a sync. Bytes in every frame matter
    more as the group grows (finding 5). And the filter's size must be common to the group: members whose filters
    differ in length ignore each other's, so a filter that followed the count would split a growing group.
    """
    count = max(1, members)
    _, t_min, t_max = next(tier for tier in reversed(REPAIR_TIERS) if count >= tier[0])
    return dataclasses.replace(
        NODE_REPAIR, t_min_ms=t_min, t_max_ms=t_max, num_response_groups=response_groups_for(count)
    )


def node_channel_config(**overrides) -> ChannelConfig:
    """The engine settings sdschat nodes use (common to the group, like T_min/T_max).

    Causal history 10 (see DESIGN.md: K=2 leaves gaps nobody learns of under
    loss); resends and SDS-R timings sized for interactive chat in small
    groups rather than the RFC's 30 s+ recommendations for large ones. The
    engine keeps the newest :data:`LOG_WINDOW` log rows in memory.

    These SDS-R timers are where a node starts; as its channel grows past 100
    and 1,000 members they follow :func:`repair_for_members` (the roster sets
    them on the engine), unless they were given here (``repair_t_min_ms=``...)
    or :attr:`NodeConfig.repair_by_size` is off.

    SDS-R's T_min grows with the gap (``t_min_growth`` 1): 2 s for one
    missing message, 4 s when two are outstanding, 8 s (the cap: T_max less a
    quarter of the window) from eight on, so a member coming back waits for
    the store node or the broker's kept session before asking everyone.

    Bloom filter of :data:`BLOOM_CAPACITY` ids. A filter acknowledges what a
    causal history of 10 does not name; in chat an acknowledgement arrives
    within seconds (the next line of anyone, or a delayed-ack sync), so the
    filter needs to hold the last few seconds of a busy channel, not its last
    10,000 messages. When a sender was away longer than the filter remembers,
    its resend is answered by a sync that names the message (the engine's
    "acks a filter forgot are named"), so no acknowledgement is lost. Members
    whose filters differ in size (an earlier sdschat: 10,000) ignore each
    other's filters and acknowledge through causal histories.
    """
    repair_keys = {f.name for f in dataclasses.fields(RepairConfig)}
    repair_over = {
        k[len("repair_") :]: v
        for k, v in overrides.items()
        if k.startswith("repair_") and k[len("repair_") :] in repair_keys
    }
    chan_over = {k: v for k, v in overrides.items() if not k.startswith("repair_")}
    repair = dataclasses.replace(NODE_REPAIR, **repair_over)
    base: dict[str, Any] = dict(
        causal_history_size=10,
        bloom_capacity=BLOOM_CAPACITY,
        resend_unacknowledged_ms=2_000,
        resend_possibly_acknowledged_ms=6_000,
        resend_backoff=1.5,
        resend_max_interval_ms=10_000,
        # each sync heard draws the members' jitter anew (every member sends its share of a quiet channel's syncs,
        # so a quiet one is heard: presence needs no frame of its own); a quiet interval then ends at the earliest
        # of the members' draws (3 s / (members + 1)) where a kept draw ended it 1.5 s past the interval: 11 s
        # keeps 3 to 5 members at the syncs a 10 s interval gave them
        sync_interval_ms=11_000,
        sync_jitter_ms=3_000,
        sync_fresh_jitter=True,
        possible_acks_group_cap=True,
        ack_delay_ms=300,
        ack_jitter_ms=700,
        lost_after_ms=120_000,
        gap_hints=10,
        log_window=LOG_WINDOW,
    )
    base.update(chan_over)
    return ChannelConfig(repair=repair, **base)


@dataclasses.dataclass
class NodeConfig:
    nick: str
    key: ChannelKey
    db_path: Path
    broker_url: str | None = None
    qos: int = 0
    channel_config: ChannelConfig = dataclasses.field(default_factory=node_channel_config)
    impairment: dict = dataclasses.field(default_factory=dict)
    seed: int | None = None
    clock: Callable[[], float] = time.time
    probe_port: int = 1883
    #: the identity of a new database (a profile's, the same in every channel); a database that has one keeps it
    identity: Identity | None = None
    #: copy ``identity``'s private key into a new database (False for a passphrase-protected profile: the key
    #: then lives only sealed in the profile, and every start gives it again)
    store_identity: bool = True
    #: a connection to share (a view of :class:`sdschat.transport.SharedConnection`, already started): the
    #: node uses it instead of connecting to ``broker_url`` itself, and stopping the node leaves it up
    transport: Transport | None = None
    #: ask a store node (if one answers on ``store_request_topic``) for missing messages and to catch up
    use_store: bool = True
    store_request_topic: str = store_proto.REQUEST_TOPIC
    #: ask by retrieval hint this long after a gap shows (well before SDS-R's T_req >= T_min)
    store_hint_delay_ms: int = 200
    #: give up quietly on an unanswered store request after this long
    store_timeout_s: float = 3.0
    #: catch-ups start this much before the last time we were known to be in sync (clock skew, in-flight)
    store_sync_margin_ms: int = 10_000
    #: messages kept in memory (the newest; plus every one whose state can still change); the rest is read
    #: from the database by :meth:`Node.history`
    memory_messages: int = 1_000
    #: event rows kept in full in the database (the newest); older ones are folded into each message's first
    #: sent/received/delivered/acknowledged times (:mod:`sdschat.store.compaction`); 0 keeps every row
    events_keep: int = 10_000
    #: announce this member (a signed join) and take part in key epochs: the CLI, the window and the demo turn it
    #: on; without, a node still reads membership messages and follows key epochs it is given
    membership: bool = False
    #: the channel's first admins (from the invite: its creator), participant ids
    admins: tuple[str, ...] = ()
    #: a later key epoch to start in (number, secret), from an invite made after a removal or rotation
    epoch: tuple[int, bytes] | None = None
    #: members removed before we joined (from the invite): refused from the start
    removed: tuple[str, ...] = ()
    #: a superseded key is kept this long (traffic of members who had not switched still opens), then deleted
    epoch_retention_ms: int = 24 * 3600 * 1000
    #: an admin starts a new key epoch when the current one is this old (0: only on /rekey and /kick)
    rekey_every_ms: int = 0
    #: the engine's SDS-R timers follow the channel's member count (:func:`repair_for_members`, set by the roster
    #: at start and as members join, leave or are removed) while ``channel_config`` has the node's default repair
    #: settings; repair settings given there explicitly are kept. False: always ``channel_config``'s.
    repair_by_size: bool = True
    #: a member that published nothing for this long sends a presence beat (:mod:`.presence`; announced, so a
    #: peer shows it offline after 2.5 times this without a frame)
    presence_every_ms: int = BEAT_EVERY_MS
    #: away on its own after this long without a key pressed (0: never)
    away_after_ms: int = AWAY_AFTER_MS
    #: what the node has to write waits this long for more before it is committed, in one transaction
    #: (:class:`~sdschat.store.StoreWriter`'s ``coalesce_ms``). Whatever it is, the node commits everything
    #: pending before it publishes a frame: no frame acknowledges what the database does not hold yet
    commit_within_ms: float = COMMIT_WITHIN_MS

    @property
    def follows_size(self) -> bool:
        """Whether the channel's SDS-R timers follow its member count (:attr:`repair_by_size`, and
        ``channel_config`` on the node's default repair settings)."""
        return self.repair_by_size and self.channel_config.repair == NODE_REPAIR

"""Channel and SDS-R configuration (all keyword arguments with defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ChannelConfig", "RepairConfig", "response_groups_for"]

PARTICIPANTS_PER_RESPONSE_GROUP = 128


def response_groups_for(expected_participants: int) -> int:
    """The RFC's default: one response group per 128 participants (``n div 128 + 1``)."""
    return max(0, expected_participants) // PARTICIPANTS_PER_RESPONSE_GROUP + 1


@dataclass(frozen=True, slots=True)
class RepairConfig:
    """SDS-R settings. ``T_min``/``T_max``/``num_response_groups`` should be common to the group.

    ``num_response_groups`` defaults to 1; give ``expected_participants`` to use
    the RFC default ``n div 128 + 1`` instead. ``max_requests`` caps the repair
    entries in one outgoing frame (RFC: 3). ``buffer_size`` bounds each repair
    buffer: when full, the entry due furthest in the future is evicted.
    ``cache_size`` bounds the repair cache of other people's messages (oldest out).

    ``t_min_growth`` (0: the RFC's one T_min): a request's T_min grows with the gap it belongs to, counted as
    the requests outstanding when it is scheduled (itself included): ``T_min * (1 + t_min_growth * log2(n))``,
    at most ``T_max`` less a quarter of the window (so requests stay spread). One missing message is asked for
    after T_min as ever; the dozens of a member coming back wait longer, since a store node or the broker's
    kept session is bringing them, and each early request is a frame to everyone (docs/sds-at-scale.md,
    findings 9 and 16). A local decision: it changes when this member asks, not what anyone sends or accepts.

    A running channel takes new timings, response groups and ``max_requests`` with
    :meth:`~sdschat.sds.channel.MessageChannel.set_repair_config` (a group that grew, say); ``enabled`` and the
    sizes stay those it was made with.
    """

    enabled: bool = True
    t_min_ms: int = 30_000
    t_max_ms: int = 120_000
    num_response_groups: int = 1
    expected_participants: int | None = None
    max_requests: int = 3
    buffer_size: int = 1000
    cache_size: int = 10_000
    t_min_growth: float = 0.0

    @property
    def response_groups(self) -> int:
        if self.expected_participants is not None:
            return response_groups_for(self.expected_participants)
        return max(1, self.num_response_groups)


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """Per-channel SDS settings.

    Resends: an unacknowledged own message is rebroadcast after
    ``resend_unacknowledged_ms``, a possibly acknowledged one after
    ``resend_possibly_acknowledged_ms``; each further resend waits
    ``resend_backoff`` times longer, up to ``resend_max_interval_ms``;
    ``max_resends`` (None: no limit) ends resending.

    Sync: a sync frame is sent when nothing was broadcast in the channel (by
    anyone) for ``sync_interval_ms`` plus a pseudo-random ``0..sync_jitter_ms``;
    at once when SDS-R repair requests are due.

    Delayed ack (off by default, RFC behaviour): with ``ack_delay_ms`` set, a
    received content message brings the next sync forward to ``ack_delay_ms``
    plus a pseudo-random ``0..ack_jitter_ms``; any frame broadcast meanwhile by
    anyone pushes it back again. So the last message of a conversation is
    acknowledged in about a second by one sync from one member, instead of
    being resent until someone's periodic sync.

    ``lost_after_ms``: a message waiting this long for a dependency nobody
    here has gets it declared lost and is delivered without it (more exactly:
    a missing id is declared lost ``lost_after_ms`` after it was first noticed).

    Limits on received frames (a frame over a limit is rejected;
    ``max_history_entries`` is 256 because @waku/sds sends up to 200):
    ``max_history_entries``, ``max_repair_entries``, ``max_id_length``,
    ``max_clock_skew_ms`` (lamport timestamps further than this ahead of the
    local clock are refused, so a bogus value cannot drag the clock forward).

    ``log_window`` (0: off, the whole log in memory): keep only the newest ``log_window`` log rows in memory;
    older ids are remembered for membership only, at 8 bytes each (:class:`~sdschat.sds.archive.LogArchive`), and
    :attr:`MessageChannel.log` lists the rows in memory. A node persists every row, so nothing is forgotten.

    ``sync_dedup``: how many sync frame ids are remembered, so that a sync arriving twice is processed once
    (about 45 bytes each; a group of 100,000 sends ~3 syncs a second, so 4,096 is ~20 minutes of them).
    """

    causal_history_size: int = 2
    bloom_capacity: int = 10_000
    bloom_error_rate: float = 0.001
    bloom_rolling: bool = True
    possible_acks_threshold: int = 2
    possible_acks_group_cap: bool = False
    bloom_certain_ack_fp: float | None = None
    #: gap hints: a message in our log that a peer's received bloom filter does not hold (a filter has no
    #: false negatives), at least ``gap_hint_margin_ms`` after we logged it, is named in our next sync's
    #: causal history (at most ``gap_hints`` extra entries per sync), so the peer notices the gap and asks
    #: SDS-R for it. 0 disables. Only the last ``gap_hint_window`` log additions are checked, each once per peer.
    gap_hints: int = 0
    gap_hint_margin_ms: int = 2_000
    gap_hint_window: int = 1_000
    gap_hint_max_age_ms: int = 60_000
    #: with ``ack_delay_ms``: how many owed acks our bloom filter does not hold a sync names at most (the rest
    #: in the next sync); see "Acks a filter does not hold are named" in :mod:`sdschat.sds.channel`
    ack_names: int = 100
    resend_unacknowledged_ms: int = 5_000
    resend_possibly_acknowledged_ms: int = 15_000
    resend_backoff: float = 2.0
    resend_max_interval_ms: int = 120_000
    max_resends: int | None = None
    sync_interval_ms: int = 30_000
    sync_jitter_ms: int = 10_000
    #: each sync heard (a peer's, or ours) draws our sync jitter anew, so each member sends about its share of a
    #: quiet channel's periodic syncs (see "Each quiet interval contested afresh" in
    #: :mod:`sdschat.sds.channel`). Off: a draw is kept until our own next sync (a quiet interval then ends
    #: ``sync_jitter_ms / 2`` after ``sync_interval_ms`` on average, whatever the group's size; on, at the
    #: earliest of the members' draws: ``sync_jitter_ms / (members + 1)``)
    sync_fresh_jitter: bool = False
    ack_delay_ms: int | None = None
    ack_jitter_ms: int = 500
    lost_after_ms: int = 300_000
    outgoing_buffer_size: int = 1_000
    incoming_buffer_size: int = 10_000
    max_history_entries: int = 256
    max_repair_entries: int = 32
    max_id_length: int = 256
    max_clock_skew_ms: int = 24 * 3600 * 1000
    log_window: int = 0
    sync_dedup: int = 4_096
    repair: RepairConfig = field(default_factory=RepairConfig)

"""The membership rules without a network: who may do what, ties between two admins, retention, persistence."""

from __future__ import annotations

import json

import pytest

from sdschat.crypto import ChannelKey, Identity
from sdschat.crypto.epochs import exchange_public
from sdschat.node.events import MESSAGE_ACTION_KINDS
from sdschat.node.membership import (
    MAX_EPOCH,
    ControlError,
    Membership,
    describe,
    invite_refusal,
    parse_control,
    redacted_body,
)
from sdschat.node.payload import CONTROL_KINDS, CONTROL_PREFIXES, KINDS, QUIET_PREFIXES, AppPayload


def group(n: int = 3, admins: int = 1):
    key = ChannelKey.generate("rules")
    ids = [Identity.generate() for _ in range(n)]
    root = [i.participant_id for i in ids[:admins]]
    states = [Membership(i.participant_id, key, root) for i in ids]
    for s in states:
        for i in ids:
            s.apply_join(i.participant_id, exchange_public(i))
    return key, ids, states


def deliver(states, ids, author: int, data: dict, mid: str, now: int = 1_000):
    parsed = parse_control("epoch", json.loads(json.dumps(data)))
    return [s.apply_epoch(ids[author].participant_id, mid, parsed, ids[k], now) for k, s in enumerate(states)]


def test_a_kick_gives_everyone_but_the_removed_the_new_key() -> None:
    key, ids, states = group(3)
    data = states[0].new_epoch(ids[0], remove=[ids[2].participant_id])
    out = deliver(states, ids, 0, data, "m1")
    assert [o.mine for o in out] == [True, True, False] and out[2].removed_me
    assert states[0].current.secret == states[1].current.secret and states[0].current.number == 1
    assert states[2].current.number == 0 and states[2].send_key.topic == key.topic
    # joins of the removed are ignored from now on, and the next epoch leaves them out without being told
    assert not states[0].apply_join(ids[2].participant_id, exchange_public(ids[2]))
    assert ids[2].participant_id not in states[0].new_epoch(ids[0])["keys"]


def test_only_admins_change_keys_or_name_admins() -> None:
    _, ids, states = group(3)
    bob_as_admin = Membership(ids[1].participant_id, states[1].base, [ids[1].participant_id])
    bob_as_admin.apply_join(ids[2].participant_id, exchange_public(ids[2]))
    forged = bob_as_admin.new_epoch(ids[1])
    with pytest.raises(ControlError, match="only an admin"):
        deliver(states[:1], ids, 1, forged, "m1")
    with pytest.raises(ControlError, match="only an admin"):
        states[0].apply_admin(ids[1].participant_id, [ids[1].participant_id])
    with pytest.raises(ControlError):
        states[1].new_epoch(ids[1])
    assert states[0].apply_admin(ids[0].participant_id, [ids[1].participant_id]) == [ids[1].participant_id]


def test_two_admins_at_once_the_lower_message_id_wins_both_keys_kept_and_a_lost_kick_is_redone() -> None:
    _, ids, states = group(4, admins=2)
    for s in states:  # both admins are admins everywhere
        s.admins.update({ids[0].participant_id, ids[1].participant_id})
    a_kicks = states[0].new_epoch(ids[0], remove=[ids[3].participant_id])
    b_rekeys = states[1].new_epoch(ids[1])
    out_a = deliver(states, ids, 0, a_kicks, "bb" * 32)
    out_b = deliver(states, ids, 1, b_rekeys, "aa" * 32)
    for s in states[:3]:
        assert s.current.message_id == "aa" * 32 and len(s.keys()) == 3  # epoch 0 and both epoch 1 keys
    assert states[0].send_key.topic == states[2].send_key.topic
    # alice's kick lost the tie, and the winner's key reached the member she removed: she starts epoch 2
    assert out_b[0].redo == (ids[3].participant_id,) and not out_a[0].redo
    assert states[0].new_epoch(ids[0], remove=out_b[0].redo)["epoch"] == 2


def test_keys_superseded_longer_than_the_window_are_forgotten_and_the_state_round_trips() -> None:
    key, ids, states = group(2)
    deliver(states, ids, 0, states[0].new_epoch(ids[0]), "m1", now=1_000)
    s = states[1]
    assert len(s.keys()) == 2 and s.expire(1_000 + 59_999, 60_000) == []
    text = s.to_json()
    copy = Membership(ids[1].participant_id, key)
    copy.load_json(text)
    assert copy.current.secret == s.current.secret and copy.members == s.members
    gone = s.expire(1_000 + 60_000, 60_000)
    assert [e.number for e in gone] == [0] and len(s.keys()) == 1 and key.topic not in s.topics()
    again = Membership(ids[1].participant_id, key)
    again.load_json(s.to_json())
    assert key.topic not in again.topics() and again.current.number == 1
    admins, current, removed = Membership.read_keys(s.to_json())
    assert admins == {ids[0].participant_id} and current == (1, s.current.secret) and removed == set()


def test_epoch_payloads_are_checked_and_the_database_copy_has_no_key_boxes() -> None:
    _, ids, states = group(2)
    data = states[0].new_epoch(ids[0])
    body = AppPayload.new("epoch", "alice", "", 1, data=data).encode()
    kept = redacted_body(body)
    assert data["e"] not in kept.decode() and all(b not in kept.decode() for b in data["keys"].values())
    kept_data = json.loads(kept)["d"]
    assert describe("epoch", kept_data, lambda p: "x") == "rotated the channel key: new key (epoch 1) for 2 members"
    for bad in (
        {**data, "epoch": 0},
        {**data, "keys": {}},
        {**data, "e": "00"},
        {**data, "why": "because"},
        {**data, "removed": ["nope"]},
        {**data, "keys": {"zz" * 16: "00" * 48}},
        [],
        {"epoch": True},
    ):
        with pytest.raises(ControlError):
            parse_control("epoch", bad)
    with pytest.raises(ValueError):
        AppPayload.new("join", "a", "", 1)  # a membership kind carries data


def test_a_membership_line_is_described_whatever_its_data() -> None:
    """The line is shown before the rules check the data (found by tests/support/fuzz_frames.py: None where a list was
    expected raised): odd data gives a plain line, never an error."""
    for kind, data, line in (
        ("admin", {"add": None}, "made nobody admins"),
        (
            "epoch",
            {"removed": None, "keys": None, "epoch": "x"},
            "rotated the channel key: new key (epoch ?) for 0 members",
        ),
        ("epoch", {"why": "grant", "keys": 5}, "gave nobody the channel key (epoch ?)"),
        ("admin", {"add": [1, None, "ab" * 16]}, "made abab an admin"),  # what is no id is left out
        ("join", [], "join"),
        ("epoch", {"removed": ["cd" * 16], "epoch": 2}, "removed cdcd: new key (epoch 2) for 0 members"),
    ):
        assert describe(kind, data, lambda p: p[:4]) == line, (kind, data)
    assert describe("leave", {}, str) == "left" and describe("nick", {"from": "bob"}, str) == "was bob"
    assert describe("nick", {"from": 5}, str) == "changed nick"


def test_the_prefixes_that_keep_membership_lines_out_of_unread_counts_match_their_encoding() -> None:
    # the store matches stored payloads against CONTROL_PREFIXES without decoding them
    for kind in KINDS:
        if kind in CONTROL_KINDS:
            data: dict | None = {"x": 1}
        elif kind in MESSAGE_ACTION_KINDS:
            data = {"t": "ab" * 32, "text": "x", "e": "👍"}
        else:
            data = None
        encoded = AppPayload.new(kind, "alice", "text", 1_000, data=data).encode()
        assert encoded.startswith(CONTROL_PREFIXES) == (kind in CONTROL_KINDS), kind
        # and an unread count leaves out membership changes and edits, deletions and reactions alike
        assert encoded.startswith(QUIET_PREFIXES) == (kind in CONTROL_KINDS | MESSAGE_ACTION_KINDS), kind
    assert CONTROL_KINDS == {"join", "admin", "epoch", "leave", "nick"}  # every kind that carries data: never unread


def test_after_a_removal_only_members_admitted_since_are_accepted_and_nobody_else_gets_a_key() -> None:
    """The cut (Membership.refusal): alice kicks carol in epoch 1; eve holds only the key from before."""
    key, ids, states = group(3)
    alice, bob, carol = (i.participant_id for i in ids)
    eve = Identity.generate()
    cut = states[0].new_epoch(ids[0], remove=[carol])
    deliver(states, ids, 0, cut, "m1")
    a = states[0]
    assert (a.cut, a.admitted) == (1, {alice, bob})
    # bob, who had not switched yet, is still heard under the old key; eve is not, however her join travels
    assert a.refusal(bob, 0, 0) is None
    assert a.refusal(eve.participant_id, 0, 0) == "stale_key"
    assert a.refusal(eve.participant_id, 0, 1, direct=False) == "stale_key"  # relayed under the new key
    assert not a.apply_join(eve.participant_id, exchange_public(eve), 0)
    assert eve.participant_id not in a.members and not a.needs_grant(eve.participant_id)
    assert eve.participant_id not in a.new_epoch(ids[0])["keys"]  # the next epoch is not sealed to her
    # claiming the new epoch while holding only the old key is a lie when she publishes it herself
    assert a.refusal(eve.participant_id, 1, 0) == "bad_epoch"
    assert a.refusal(alice, 2, 1, kind="epoch") is None  # (an admin hands epoch messages on under old keys)
    # the removed: what they publish, and what they wrote after their removal, however it travels
    assert a.refusal(carol, 0, 0) == "removed"
    assert a.refusal(carol, 1, 1, direct=False) == "removed"
    assert a.refusal(carol, 0, 1, direct=False) is None  # written before: history a repair may bring
    # a newcomer with an invite made since (the new key) is admitted, and entitled to later epochs
    assert a.apply_join(eve.participant_id, exchange_public(eve), 1) and eve.participant_id in a.admitted
    assert a.entitled(eve.participant_id, 0) and not a.entitled(carol, 0)
    # a member that took eve's old-key join before it knew of the cut forgets her once it learns of it
    unaware = Membership(bob, key, [alice])
    for i in ids:
        unaware.apply_join(i.participant_id, exchange_public(i))
    assert unaware.apply_join(eve.participant_id, exchange_public(eve), 0) and eve.participant_id in unaware.members
    unaware.apply_epoch(alice, "m1", parse_control("epoch", json.loads(json.dumps(cut))), ids[1], 1_000)
    assert eve.participant_id not in unaware.members and eve.participant_id not in unaware.admitted
    # the state round-trips
    again = Membership(alice, key)
    again.load_json(a.to_json())
    assert (again.cut, again.admitted, again.locked_out) == (a.cut, a.admitted, 0)


def test_a_member_without_a_box_in_a_newer_epoch_is_locked_out_until_it_gets_the_key() -> None:
    key, ids, states = group(3)
    late = Identity.generate()
    newcomer = Membership(late.participant_id, key, [ids[0].participant_id])
    data = states[0].new_epoch(ids[0])  # a rekey before the newcomer's join reached the admin
    out = newcomer.apply_epoch(ids[0].participant_id, "m1", parse_control("epoch", data), late, 1_000)
    assert not out.mine and not out.removed_me and newcomer.locked_out == 1
    assert "epoch 1" in invite_refusal(newcomer.to_json())
    assert newcomer.invite_refusal() == invite_refusal(newcomer.to_json())  # the live state and the saved agree
    deliver(states, ids, 0, data, "m1")
    states[0].apply_join(late.participant_id, exchange_public(late), 0)
    assert states[0].needs_grant(late.participant_id)
    grant = parse_control("epoch", states[0].grant_data(ids[0], [late.participant_id]))
    newcomer.apply_epoch(ids[0].participant_id, "m2", grant, late, 2_000)
    assert newcomer.current.number == 1 and newcomer.locked_out == 0
    assert invite_refusal(newcomer.to_json()) is None and newcomer.invite_refusal() is None


def test_a_removed_member_cannot_make_an_invite_and_epoch_numbers_are_bounded() -> None:
    _, ids, states = group(3)
    deliver(states, ids, 0, states[0].new_epoch(ids[0], remove=[ids[2].participant_id]), "m1")
    assert "removed" in invite_refusal(states[2].to_json())
    assert states[2].invite_refusal() == invite_refusal(states[2].to_json())
    assert invite_refusal(states[1].to_json()) is None and states[1].invite_refusal() is None
    data = states[0].new_epoch(ids[0])
    for bad in (0, MAX_EPOCH, 2**32 - 1):
        with pytest.raises(ControlError, match="epoch"):
            parse_control("epoch", {**data, "epoch": bad})
    with pytest.raises(ValueError):
        AppPayload.new("msg", "a", "b", 1, epoch=MAX_EPOCH)
    assert AppPayload.decode(AppPayload.new("msg", "a", "b", 1, epoch=7).encode()).epoch == 7
    assert b'"e"' not in AppPayload.new("msg", "a", "b", 1).encode()  # epoch 0: the payload as before

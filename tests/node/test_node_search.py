"""Search over the stored text: a real node on a real broker, its SQLite file; hits arrive by every path
(sent, received, read back after a restart), and a result's neighbours load around it."""

from __future__ import annotations

import dataclasses

import pytest
from node_helpers import FAST, run, settle

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.store import SearchQueryError


def test_search_finds_sent_and_received_text_and_loads_around_a_hit(node_mosquitto, tmp_path):
    key = ChannelKey.generate("search")

    async def start(name: str) -> Node:
        cfg = NodeConfig(
            name, key, tmp_path / f"{name}.db", node_mosquitto.url, channel_config=node_channel_config(**FAST)
        )
        return await Node.start(cfg)

    async def main():
        a, b = await start("alice"), await start("bob")
        try:
            for i in range(60):
                text = "Lunch at the Café?" if i == 17 else ("lunchbox recall" if i == 40 else f"line {i}")
                await (a if i % 2 else b).send_text(text)
            await settle([a, b], 60, timeout=60)
            hits = await a.search("cafe lunch")
            assert [h.message.text for h in hits] == ["Lunch at the Café?"]
            hit = hits[0]
            assert hit.channel == "search" and hit.message.nick == "alice" and hit.message.own
            assert [hit.message.text[s:e] for s, e in hit.spans] == ["Lunch", "Café"]
            prefix = await b.search("lunch*")  # newest stored first
            assert [h.message.text for h in prefix] == ["lunchbox recall", "Lunch at the Café?"]
            assert not prefix[1].message.own and prefix[0].message.own
            page = await b.search("lunch*", limit=1)
            assert [h.message.text for h in await b.search("lunch*", before=page[0].rowid)] == ["Lunch at the Café?"]
            assert await a.search("lunch NOT cafe") == []
            for bad in ("", '"unclosed', "OR", "NOT lunch", "!!!"):
                with pytest.raises(SearchQueryError) as info:
                    await a.search(bad)
                assert "\n" not in str(info.value) and "phrase" in str(info.value)
            # the neighbours of a hit: 5 on each side, and more beyond on both
            m = hit.message
            around, older, newer = await a.around((m.lamport_timestamp, m.message_id), limit=5)
            assert len(around) == 11 and around[5].message_id == m.message_id and older and newer
            everything = await a.history()
            i = [x.message_id for x in everything].index(m.message_id)
            assert [x.message_id for x in around] == [x.message_id for x in everything[i - 5 : i + 6]]
            last = everything[-3]
            tail, older, newer = await a.around((last.lamport_timestamp, last.message_id), limit=5)
            assert [x.message_id for x in tail] == [x.message_id for x in everything[-8:]] and not newer
        finally:
            await a.stop()
            await b.stop()
        again = await Node.start(dataclasses.replace(b.config))  # read back from the file
        try:
            assert [h.message.text for h in await again.search("recall")] == ["lunchbox recall"]
        finally:
            await again.stop()

    run(main())


def _cli(capsys):
    """``sdschat(*argv)``: the command run in this process; its exit code, stdout and stderr."""
    from sdschat.cli import main

    def sdschat(*argv):
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return sdschat


def test_sdschat_search_over_the_channels_of_a_profile(node_mosquitto, tmp_path, capsys):
    """``sdschat search``: every channel of the profile, newest first; ``--channel``, ``--json``; a bad query
    or channel is one line and exit 2; a peer's control characters never reach the terminal."""
    import json

    home = tmp_path / "me"
    sdschat = _cli(capsys)

    assert sdschat("init", "--name", "zed", "--broker", node_mosquitto.url, "--home", home)[0] == 0
    for channel, text in (("general", "deploy friday? {i}"), ("ops", "the deploy is done {i}\x1b[2J")):
        assert sdschat("new", channel, "--home", home)[0] == 0
        # alone in the channel nobody acknowledges: the bot gives up waiting (exit 3), its messages are stored
        assert (
            sdschat(
                "bot",
                "--channel",
                channel,
                "--count",
                2,
                "--interval",
                0,
                "--max-runtime",
                1,
                "--quiet",
                "--text",
                text,
                "--home",
                home,
            )[0]
            == 3
        )
    code, out, err = sdschat("search", "deploy", "--home", home)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4 and err == ""
    assert {line.split()[0] for line in lines} == {"#general", "#ops"}
    assert all("zed" in line and "\x1b" not in line for line in lines)
    code, out, _ = sdschat("search", "deploy", "friday", "--channel", "general", "--json", "--home", home)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["channel"] for r in rows] == ["general", "general"]
    assert [r["text"][s:e] for r in rows for s, e in r["matches"]] == ["deploy", "friday"] * 2
    assert sdschat("search", "nothing-like-it", "--home", home)[:2] == (0, "")
    for argv, says in (
        (['"deploy'], "quote"),
        (["NOT", "x"], "NOT"),
        (["x", "--channel", "nope"], "nope"),
        (["x", "--limit", "0"], "limit"),
    ):
        code, out, err = sdschat("search", *argv, "--home", home)
        assert (code, out) == (2, "") and err.count("\n") == 1 and says in err


def test_sdschat_search_names_two_members_of_one_nick_apart_as_the_window_does(node_mosquitto, tmp_path, capsys):
    """Two members go by ``bob`` and a third by ``zed``, the searching profile's own name: ``sdschat search``
    gives each of them with the start of their id (``bob#3f2a``), as the window does, so nobody can pass for
    someone else in its lines (our own lines too, while someone else goes by our name); ``--json`` keeps the nick
    as sent. A damaged channel beside it is one line after its results."""
    import json

    from sdschat.cli.wiring import profile_node_config
    from sdschat.profile import Profile, resolve_paths

    home = tmp_path / "me"
    sdschat = _cli(capsys)

    assert sdschat("init", "--name", "zed", "--broker", node_mosquitto.url, "--home", home)[0] == 0
    assert sdschat("new", "general", "--home", home)[0] == 0
    profile = Profile.load(resolve_paths(home))
    key = profile.key(profile.channel("general"))

    async def chat() -> list[Node]:
        zed = await Node.start(profile_node_config(profile, profile.channel("general")))
        others = [
            await Node.start(
                NodeConfig(
                    nick, key, tmp_path / f"{i}.db", node_mosquitto.url, channel_config=node_channel_config(**FAST)
                )
            )
            for i, nick in enumerate(("bob", "bob", "zed", "carol"))
        ]
        try:
            await zed.send_text("hello from the real zed")
            for i, node in enumerate(others):
                await node.send_text(f"hello from member {i}")
            await settle([zed, *others], 6, timeout=30)  # (the 5 lines, and zed's profile saying it joined)
        finally:
            for node in (zed, *others):
                await node.stop()
        return others

    others = run(chat())
    code, out, err = sdschat("search", "hello", "--home", home)
    assert code == 0 and err == "", err
    who = {line.split("  ")[3]: line.split("  ")[2] for line in out.splitlines()}
    bob0, bob1, fake_zed, carol = (n.participant_id for n in others)
    assert who == {
        "hello from member 0": f"bob#{bob0[:4]}",
        "hello from member 1": f"bob#{bob1[:4]}",
        "hello from member 2": f"zed#{fake_zed[:4]}",
        "hello from member 3": "carol",
        "hello from the real zed": f"zed#{profile.participant_id[:4]}",  # (ours too: the two zeds look apart)
    }, out
    code, out, _ = sdschat("search", "hello", "--json", "--home", home)
    assert code == 0 and sorted(json.loads(line)["nick"] for line in out.splitlines()) == [
        "bob",
        "bob",
        "carol",
        "zed",
        "zed",
    ]

    # a second channel whose database is damaged: the first is still searched, then one line names it (exit 2)
    from sdschat.store import Store

    assert sdschat("new", "ops", "--home", home)[0] == 0
    db = Profile.load(resolve_paths(home)).db_path(Profile.load(resolve_paths(home)).channel("ops"))

    async def make() -> None:
        await (await Store.open(db)).close()

    run(make())
    data = bytearray(db.read_bytes())
    data[4096:] = bytes(b ^ 0x5A for b in data[4096:])  # every page but the header's
    db.write_bytes(bytes(data))
    code, out, err = sdschat("search", "hello", "--home", home)
    assert code == 2 and len(out.splitlines()) == 5 and all(line.startswith("#general") for line in out.splitlines())
    assert err.count("\n") == 1 and "#ops" in err and "damaged" in err, err

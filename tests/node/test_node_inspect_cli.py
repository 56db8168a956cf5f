"""`sdschat inspect` on a profile: a message looked up in every joined channel (or one, ``--channel``), the gaps of
every joined channel under its name, and bad input as one line with exit status 2. Real nodes on mosquitto write
the profile's channel databases; the command reads them afterwards (in-process ``main``, as a shell would run it)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from node_helpers import run, start, until

from sdschat.cli.main import main
from sdschat.profile import Profile, resolve_paths
from sdschat.store import EventRow, Store

pytestmark = pytest.mark.timeout(150)


def inspect(capsys, home, *args):
    """``sdschat --home HOME inspect ARGS``: (exit status, stdout lines, stderr lines)."""
    capsys.readouterr()
    code = main(["--home", str(home), "inspect", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


@pytest.fixture(scope="module")
def chats(node_mosquitto, tmp_path_factory):
    """alice's profile with three channels: in #one she missed one of bob's messages (the gap closed when it came
    again), in #two nothing went wrong, #empty was never opened. Returns (home, ids)."""
    tmp = tmp_path_factory.mktemp("inspect-cli")
    home = tmp / "home"
    profile = Profile.create(resolve_paths(home), "alice")
    one = profile.add_channel("one", os.urandom(32), db=tmp / "a1.db")
    two = profile.add_channel("two", os.urandom(32), db=tmp / "a2.db")
    profile.add_channel("empty", os.urandom(32), db=tmp / "never.db")
    k1, k2 = profile.key(one), profile.key(two)

    async def main_():
        a1, b1 = await start("a1", k1, tmp, node_mosquitto.url), await start("b1", k1, tmp, node_mosquitto.url)
        a2, b2 = await start("a2", k2, tmp, node_mosquitto.url), await start("b2", k2, tmp, node_mosquitto.url)
        try:
            first = await b1.send_text("first")
            await until(lambda: first in a1.channel.log)
            a1.set_impairment(loss_in=1.0)
            missed = await b1.send_text("alice misses this")
            await asyncio.sleep(0.15)
            a1.set_impairment(loss_in=0.0)
            names = await b1.send_text("names it")
            hello = await a2.send_text("hello two")
            await until(lambda: missed in a1.channel.log and names in a1.channel.log and hello in b2.channel.log)
            await until(lambda: not a2.pending())
        finally:
            for n in (a1, b1, a2, b2):
                await n.stop()
        return {"missed": missed, "names": names, "hello": hello}

    ids = run(main_())
    return home, ids, tmp, k2.channel_id


def test_a_message_is_found_in_whichever_joined_channel_holds_it(chats, capsys):
    home, ids, _, _ = chats
    code, out, err = inspect(capsys, home, ids["hello"][:10])
    assert code == 0, err
    assert out[0] == "in #two" and out[1].startswith(f"message {ids['hello'][:16]}… from you, Lamport time ")
    assert "text: hello two" in out
    code, out, err = inspect(capsys, home, ids["missed"], "--json")
    assert code == 0, err
    doc = json.loads(out[0])
    assert len(out) == 1 and doc["channel"] == "one" and doc["message_id"] == ids["missed"]
    assert isinstance(doc["lamport_timestamp"], int) and doc["text"] == "alice misses this"
    assert [s["kind"] for s in doc["steps"]][:1] == ["missing"] and "delivered" in [s["kind"] for s in doc["steps"]]


def test_channel_names_one_channel_of_the_profile(chats, capsys):
    home, ids, _, _ = chats
    code, out, err = inspect(capsys, home, "--channel", "two", ids["hello"][:8], "--json")
    assert code == 0, err
    doc = json.loads(out[0])
    assert doc["channel"] == "two" and doc["message_id"] == ids["hello"] and doc["own"] is True
    code, out, err = inspect(capsys, home, "--channel", "two", ids["hello"][:8])
    assert code == 0 and out[0].startswith(f"message {ids['hello'][:16]}… from you")  # one channel: no heading
    # the message of #one is not in #two
    code, out, err = inspect(capsys, home, "--channel", "two", ids["missed"])
    assert code == 2 and out == [] and err == [f"sdschat: no message {ids['missed']} in this channel"]


def test_gaps_lists_every_joined_channel_under_its_name(chats, capsys):
    home, ids, _, _ = chats
    code, out, err = inspect(capsys, home, "--gaps")
    assert code == 0, err
    heads = [i for i, line in enumerate(out) if line.startswith("#")]
    assert [out[i] for i in heads] == ["#one", "#two", "#empty"]  # in the order they were joined
    one = out[heads[0] + 1 : heads[1]]
    gap = next(line for line in one if ids["missed"][:16] in line)
    assert f"{ids['missed'][:16]} from b1: noticed through " in gap and "after" in gap
    assert out[heads[1] + 1 : heads[2]] == ["no gaps: every message arrived in order", ""]
    assert out[heads[2] + 1 :] == ["nothing stored yet"]
    code, out, err = inspect(capsys, home, "--gaps", "--json")
    assert code == 0, err
    docs = [json.loads(line) for line in out]
    assert docs and {d["channel"] for d in docs} == {"one"}  # #two has no gap, #empty nothing stored
    assert any(d["message_id"] == ids["missed"] and d["how"] != "open" for d in docs)
    code, out, err = inspect(capsys, home, "--gaps", "--channel", "two", "--json")
    assert code == 0 and out == []


def test_an_id_in_two_channels_or_in_none_is_one_line(chats, capsys):
    home, ids, tmp, two = chats
    code, out, err = inspect(capsys, home, "abcdef0123")
    assert code == 2 and out == []
    assert err == ["sdschat: no message abcdef0123 in any joined channel (#one, #two, #empty)"]

    async def name_it_in_two():  # #two's database names the message of #one too (a repair it asked for, say)
        async with await Store.open(tmp / "a2.db", create=False) as store:
            await store.apply(
                two, events=[EventRow("repair_requested", 1, ids["missed"], None, detail={"carrier": "0" * 64})]
            )

    asyncio.run(name_it_in_two())
    code, out, err = inspect(capsys, home, ids["missed"][:12])
    assert code == 2 and out == []
    assert err == [
        f"sdschat: {ids['missed'][:12]} names messages in 2 channels (#one, #two): give more of the id, or --channel"
    ]
    code, out, err = inspect(capsys, home, "--channel", "one", ids["missed"][:12])
    assert code == 0 and out[0].startswith(f"message {ids['missed'][:16]}… from b1")


@pytest.mark.parametrize(
    "args, expect",
    [
        ((), "give a message id, or --gaps"),
        (("abcdef12", "--gaps"), "give a message id, or --gaps"),
        (("zz",), "'zz' is not a message id (hex, at least 6 characters)"),
        (("abc",), "'abc' is not a message id (hex, at least 6 characters)"),
        (("--channel", "nope", "--gaps"), "not in channel 'nope' (joined: one, two, empty)"),
        (("--channel", "empty", "--gaps"), "#empty has nothing stored yet"),
        (("--channel", "one", "--db", "x.db", "--gaps"), "argument --db: not allowed with argument --channel"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(chats, capsys, args, expect):
    home = chats[0]
    code, out, err = inspect(capsys, home, *args)
    assert code == 2 and out == [] and len(err) == 1 and expect in err[0], err


def test_no_profile_no_channel_and_bad_databases_are_one_line(tmp_path, capsys):
    code, out, err = inspect(capsys, tmp_path / "nobody", "--gaps")
    assert code == 2 and len(err) == 1 and "no profile at" in err[0] and "sdschat init" in err[0]
    home = tmp_path / "home"
    Profile.create(resolve_paths(home), "alone")
    code, out, err = inspect(capsys, home, "abcdef12")
    assert code == 2 and err == [
        "sdschat: no channel joined yet: nothing to inspect (create one with `sdschat new`, or `sdschat join`)"
    ]
    code, out, err = inspect(capsys, home, "--db", str(tmp_path / "missing.db"), "--gaps")
    assert code == 2 and err == [f"sdschat: no database at {tmp_path / 'missing.db'}"]
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    code, out, err = inspect(capsys, home, "--db", str(junk), "abcdef12")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"sdschat: {junk}: "), err
    # and as a shell runs it: one line on stderr, no traceback
    p = subprocess.run(
        [sys.executable, "-m", "sdschat", "--home", str(home), "inspect", "--db", str(junk), "--gaps"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr

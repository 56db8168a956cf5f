"""Make the SVG screenshots in ``screenshots/`` from the real app driving real nodes.

    python -m sdschat.cli.screenshots [--out screenshots] [--only chat,demo,repair,help,window,search,reply]

Everything runs headless (``App.run_test``) over one embedded broker with
in-memory channel keys; nothing is drawn by hand. Takes about half a minute
(the repair sequence waits for a real SDS-R repair).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import tempfile
import time
from pathlib import Path

from sdschat.transport import EmbeddedBroker
from sdschat.ui.app import ChatApp, DemoApp
from sdschat.ui.files import write_private_text
from sdschat.ui.timeline import MarkerItem
from sdschat.ui.window import ChannelWindow

from .window import ProfileClient
from .wiring import start_demo_nodes, stop_all

__all__ = ["main"]

CHAT_SIZE = (120, 30)  # the side panel shows from 120 columns (sdschat.ui.sizes)
DEMO_SIZE = (150, 36)
WINDOW_SIZE = (140, 40)
SMALL_SIZE = (80, 24)  # a terminal's default: the side panel gives way, the channel list narrows


_TEXT = re.compile(
    r'<text ([^>]*?)x="([\d.]+)"([^>]*?)textLength="([\d.]+)"([^>]*)>((?:&#160;)+)((?!&#160;)[^<]+)</text>'
)
_ASCII_TEXT = re.compile(r'textLength="([\d.]+)"[^>]*>([ -;=-~]+)</text>')


def leading_blanks_as_offsets(svg: str) -> str:
    """Move the blanks that open a text run into its x position.

    SVG renderers (librsvg, some browsers) drop the leading no-break spaces of a
    ``<text>`` run that has a ``textLength``, so "connected" and "  unacked 1"
    in two runs render as "connectedunacked 1". A terminal shows the blanks;
    so do the screenshots once they are offsets.
    """
    cells = [float(n) / len(t.replace("&#160;", " ")) for n, t in _ASCII_TEXT.findall(svg)]
    if not cells:
        return svg
    cell = max(set(cells), key=cells.count)

    def shift(m: re.Match) -> str:
        before, x, middle, length, after, blanks, rest = m.groups()
        n = blanks.count("&#160;")
        return (
            f'<text {before}x="{float(x) + n * cell:g}"{middle}textLength="{float(length) - n * cell:g}"'
            f"{after}>{rest}</text>"
        )

    return _TEXT.sub(shift, svg)


def _save(app, path: Path) -> None:
    svg = app.export_screenshot(title=path.stem)
    svg = re.sub(r"[ \t]+\n", "\n", svg)  # a few KB of trailing blanks
    svg = leading_blanks_as_offsets(svg)
    write_private_text(path, svg)  # 0600: what a screenshot shows is a chat's decrypted text
    print(f"wrote {path} ({len(svg) // 1024} KB)")


def _chat(node) -> list:
    """The node's chat lines (membership lines -- joins -- come when they come and are not counted)."""
    from sdschat.node.events import MEMBERSHIP_KINDS

    return [m for m in node.messages() if m.kind not in MEMBERSHIP_KINDS]


async def _wait(pilot, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"screenshots: timed out waiting for {what}")
        await pilot.pause(0.1)


@contextlib.asynccontextmanager
async def _group(workdir: Path, n: int, channel: str = "general", *, loss: float = 0.0, seed: int | None = None):
    """``n`` demo nodes (alice, bob, ...) on one embedded broker, stopped on exit."""
    broker = await EmbeddedBroker.start()
    nodes = []
    try:
        nodes = await start_demo_nodes(n, loss, channel=channel, db_dir=workdir, seed=seed, broker_url=broker.url)
        yield nodes
    finally:
        await stop_all(nodes)
        await broker.close()


async def shoot_chat(out: Path, workdir: Path) -> None:
    async with _group(workdir, 3) as (alice, bob, carol):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=CHAT_SIZE) as pilot:
            await bob.send_text("morning! the new build is up on staging")
            await pilot.pause(0.3)
            await pilot.press(*"great, trying it now", "enter")
            await pilot.pause(0.3)
            await carol.send_text("the left half of my screen is all acks and blooms")
            await pilot.pause(0.4)
            app.pane.input.load_text("/me makes coffee")
            await pilot.press("enter")
            await pilot.pause(0.5)
            await bob.send_text("glyph left of your nick: ○ sent, ◑ possibly acknowledged, ● acknowledged")
            await _wait(pilot, lambda: not alice.pending(), 10, "acks")
            bob.set_impairment(loss_in=1.0)  # so the last one stays visibly unacknowledged
            carol.set_impairment(loss_in=1.0)
            await pilot.press(*"and this one nobody has confirmed yet", "enter")
            await carol.send_typing()
            await pilot.pause(0.6)
            _save(app, out / "chat.svg")


async def shoot_repair(out: Path, workdir: Path) -> None:
    """alice misses one of bob's messages; the next one reveals the gap; a peer repairs it (SDS-R)."""
    async with _group(workdir, 3) as (alice, bob, carol):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=CHAT_SIZE) as pilot:
            await bob.send_text("release notes are in the doc")
            await carol.send_text("thanks, reading")
            await _wait(pilot, lambda: len(_chat(alice)) == 2 and not bob.pending(), 10, "settled")
            alice.set_impairment(loss_in=1.0)  # alice's link drops everything for a moment
            await bob.send_text("heads-up: the deploy moves to 3pm")
            await _wait(
                pilot,
                lambda: any(m.text.startswith("heads-up") and m.state == "acknowledged" for m in bob.messages()),
                15,
                "carol acknowledges bob",
            )
            alice.set_impairment(loss_in=0.0)
            await bob.send_text("so please hold your merges until then")
            view = app.pane.view
            await _wait(pilot, lambda: any(isinstance(i, MarkerItem) for i in view.timeline.items), 10, "marker")
            bob.set_impairment(offline=True)  # bob leaves: the repair has to come from carol's copy
            await pilot.pause(0.2)
            _save(app, out / "repair-1-missing.svg")
            await _wait(pilot, lambda: not any(isinstance(i, MarkerItem) for i in view.timeline.items), 30, "repair")
            await pilot.pause(0.3)
            _save(app, out / "repair-2-repaired.svg")


async def shoot_demo(out: Path, workdir: Path) -> None:
    async with _group(workdir, 3, "demo", loss=0.2, seed=7) as nodes:
        app = DemoApp(
            nodes,
            bots=True,
            bot_interval=1.2,
            seed=7,
            blink=False,
            subtitle=f"3 participants on {nodes[0].broker_url} · loss 20% each way · bots",
        )
        async with app.run_test(size=DEMO_SIZE) as pilot:
            await pilot.pause(9)
            _save(app, out / "demo.svg")


async def shoot_help(out: Path, workdir: Path) -> None:
    async with _group(workdir, 1, channel="help") as (alice,):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=(108, 42)) as pilot:
            await pilot.press("f1")
            await pilot.pause(0.2)
            _save(app, out / "help.svg")


async def shoot_window(out: Path, workdir: Path) -> None:
    """Bare ``sdschat``: alice's profile with four channels; bob and carol talk in two she is not looking at (at
    140x40, then at 80x24)."""
    import os

    from sdschat.profile import Profile, resolve_paths

    broker = await EmbeddedBroker.start()
    secrets = {name: os.urandom(32) for name in ("general", "release", "design", "random")}
    clients: list = []
    try:
        profiles: dict[str, Profile] = {}
        for who, channels in (("alice", list(secrets)), ("bob", ["general", "release"]), ("carol", ["design"])):
            profile = Profile.create(resolve_paths(workdir / who), who, broker.url)
            for name in channels:  # alice made them all: she is their admin
                profile.add_channel(
                    name, secrets[name], admins=None if who == "alice" else [profiles["alice"].participant_id]
                )
            profiles[who] = profile
        alice, bob, carol = [await ProfileClient.start(profiles[w]) for w in ("alice", "bob", "carol")]
        clients = [alice, bob, carol]
        app = ChannelWindow(alice, blink=False)
        async with app.run_test(size=WINDOW_SIZE) as pilot:
            general, release = bob.nodes
            await general.send_text("standup in five, same room as yesterday")
            await pilot.pause(0.3)
            await pilot.press(*"on my way", "enter")
            await pilot.pause(0.3)
            await general.send_text("bring the release checklist please")
            await _wait(pilot, lambda: not alice.nodes[0].pending(), 10, "acks")
            for text in ("tagged v0.3.0-rc1", "changelog draft is in the doc", "who signs off on the migration?"):
                await release.send_text(text)
            await carol.nodes[0].send_text("new palette mock-ups are up")
            await _wait(
                pilot,
                lambda: app.channel_list.rows[1].unread == 3 and app.channel_list.rows[2].unread == 1,
                10,
                "unread",
            )
            await pilot.pause(0.3)
            _save(app, out / "window.svg")
            await pilot.resize_terminal(*SMALL_SIZE)
            await pilot.pause(0.3)
            _save(app, out / f"window-{SMALL_SIZE[0]}x{SMALL_SIZE[1]}.svg")
    finally:
        await stop_all(clients)
        await broker.close()


async def shoot_search(out: Path, workdir: Path) -> None:
    """``/search``: bob's channel history, searched for a word and a prefix, the words marked."""
    async with _group(workdir, 2) as (alice, bob):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=CHAT_SIZE) as pilot:
            for text in (
                "the deploy checklist is in the wiki",
                "lunch at noon?",
                "who reviews the deploy script?",
                "deployment went fine on staging",
                "coffee first",
                "friday deploy: yes or no?",
            ):
                await bob.send_text(text)
            await _wait(pilot, lambda: len(_chat(alice)) == 6, 10, "history")
            await pilot.press(*"/search deploy*", "enter")
            await _wait(pilot, lambda: getattr(app.screen, "hits", None), 10, "results")
            await pilot.pause(0.2)
            _save(app, out / "search.svg")


async def shoot_reply(out: Path, workdir: Path) -> None:
    """A reply whose parent alice missed: "reply to a message possibly missing", then filled in by repair."""
    async with _group(workdir, 3) as (alice, bob, carol):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=CHAT_SIZE) as pilot:
            await carol.send_text("anyone up for a release retro?")
            await _wait(pilot, lambda: len(_chat(alice)) == 1, 10, "first")
            alice.set_impairment(loss_in=1.0)
            parent = await bob.send_text("retro friday 3pm, I'll bring the graphs")
            await _wait(pilot, lambda: any(m.state == "acknowledged" for m in bob.messages()), 15, "carol has it")
            alice.set_impairment(loss_in=0.0)
            await carol.send_text("works for me", reply_to=parent)
            view = app.pane.view
            await _wait(pilot, lambda: any(i.quote for i in view.timeline.by_mid.values()), 10, "the reply")
            bob.set_impairment(offline=True)  # the repair comes from carol's copy
            await pilot.pause(0.2)
            _save(app, out / "reply-1-parent-missing.svg")
            await _wait(
                pilot,
                lambda: any(i.quote and i.quote[0] == "text" for i in view.timeline.by_mid.values()),
                30,
                "repair",
            )
            await pilot.pause(0.3)
            _save(app, out / "reply-2-filled-in.svg")


async def _repaired_by_carol(pilot, alice, bob, carol) -> str:
    """alice misses one of bob's messages, bob goes away, carol's copy repairs it (SDS-R); returns its id."""
    await bob.send_text("release notes are in the doc")
    await carol.send_text("thanks, reading")
    await _wait(pilot, lambda: len(_chat(alice)) == 2 and not bob.pending(), 10, "settled")
    alice.set_impairment(loss_in=1.0)
    missed = await bob.send_text("heads-up: the deploy moves to 3pm")
    await _wait(
        pilot,
        lambda: any(m.message_id == missed and m.state == "acknowledged" for m in bob.messages()),
        15,
        "carol acknowledges bob",
    )
    bob.set_impairment(offline=True)  # the repair has to come from carol's copy
    alice.set_impairment(loss_in=0.0)
    await carol.send_text("so please hold your merges until then")
    await _wait(pilot, lambda: missed in alice.channel.log, 30, "repair")
    return missed


async def shoot_inspect(out: Path, workdir: Path) -> None:
    """``i`` on a message alice missed and carol repaired: its life, from noticed missing to delivered."""
    async with _group(workdir, 3) as (alice, bob, carol):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=CHAT_SIZE) as pilot:
            missed = await _repaired_by_carol(pilot, alice, bob, carol)
            await pilot.pause(0.3)
            view = app.pane.view
            await pilot.press("up")
            while view.cursor is not None and view.cursor.msg.message_id != missed:
                await pilot.press("up")
            await pilot.press("i")
            await _wait(
                pilot, lambda: any("delivered" in line for line in getattr(app.screen, "lines", [])), 10, "inspector"
            )
            await pilot.pause(0.2)
            _save(app, out / "inspector.svg")


async def shoot_wire(out: Path, workdir: Path) -> None:
    """F5 after a repair: the frames in and out, what the node did with each; then /gaps."""
    async with _group(workdir, 3) as (alice, bob, carol):
        app = ChatApp(alice, blink=False)
        async with app.run_test(size=(CHAT_SIZE[0] + 20, CHAT_SIZE[1])) as pilot:
            await _repaired_by_carol(pilot, alice, bob, carol)
            await pilot.press(*"ok, holding", "enter")
            alice.receiver.on_frame(b"\x00 not an envelope")  # one frame nobody can open
            await pilot.pause(0.5)
            await pilot.press("f5")
            await pilot.pause(0.4)
            _save(app, out / "wire.svg")
            await pilot.press("escape")
            app.pane.input.load_text("/gaps")
            await pilot.press("enter")
            await _wait(pilot, lambda: getattr(app.screen, "lines", None), 10, "gaps")
            await pilot.pause(0.3)
            _save(app, out / "gaps.svg")


SHOTS = {
    "chat": shoot_chat,
    "repair": shoot_repair,
    "demo": shoot_demo,
    "help": shoot_help,
    "window": shoot_window,
    "search": shoot_search,
    "reply": shoot_reply,
    "inspect": shoot_inspect,
    "wire": shoot_wire,
}


async def run(out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sdschat-shots-") as tmp:
        for name in only:
            workdir = Path(tmp) / name
            workdir.mkdir()
            await SHOTS[name](out, workdir)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sdschat.cli.screenshots", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("screenshots"))
    ap.add_argument("--only", default=",".join(SHOTS), help=f"comma-separated subset of {', '.join(SHOTS)}")
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SHOTS]
    if unknown:
        print(f"unknown screenshot {unknown[0]!r}", file=sys.stderr)
        return 2
    asyncio.run(run(args.out, only))
    return 0


if __name__ == "__main__":
    sys.exit(main())

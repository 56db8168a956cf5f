"""Word wrap, painting, slash-command parsing, and the UI's layering rule."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest
from rich.cells import cell_len

import sdschat.ui

# isort: split
from sdschat.node import events as ev
from sdschat.ui import slash
from sdschat.ui.layout import Layout, clean_text, wrap_spans
from sdschat.ui.timeline import MsgItem


def check_spans(text: str, first: int, rest: int) -> None:
    spans = wrap_spans(text, first, rest)
    pos = 0
    for i, (a, b) in enumerate(spans):
        assert text[pos:a] in ("", "\n")
        shown = text[a:b].rstrip()
        assert cell_len(shown) <= (first if i == 0 else rest) or len(shown.strip()) == 1
        pos = b
    assert pos == len(text)


@pytest.mark.parametrize("alphabet", ["ab cd  xyz\n", "ab cd éü漢字 \n"])
def test_wrap_covers_the_text_and_respects_widths(alphabet: str) -> None:
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 70)))
        check_spans(text, rng.randint(1, 20), rng.randint(1, 20))


def test_wrap_breaks_at_spaces() -> None:
    text = "hello world this is long"
    assert [text[a:b].rstrip() for a, b in wrap_spans(text, 11, 8)] == ["hello world", "this is", "long"]


def test_control_and_bidi_characters_are_not_painted() -> None:
    assert clean_text("a\x1b[31mred\x07\u202eb\tc") == "a[31mredb    c"
    assert clean_text("fine text") == "fine text"


def test_height_matches_painted_lines() -> None:
    rng = random.Random(3)
    layout = Layout(50, UTC)
    for i in range(300):
        words = " ".join("w" * rng.randint(1, 12) for _ in range(rng.randint(1, 30)))
        text = rng.choice([words, words + "\nsecond line", "漢字" * rng.randint(1, 40)])
        m = ev.ChatMessage(
            f"{i}",
            "s",
            "nick",
            text,
            rng.choice(["msg", "me"]),
            1_763_805_600_000 + i * 3_600_000,
            i,
            False,
            ev.RECEIVED,
            repaired=bool(i % 5 == 0),
        )
        item = MsgItem(m)
        sep = m.sent_at_ms if i % 3 == 0 else None
        assert layout.height(item, sep, str) == len(layout.paint(item, sep, str))
        for strip in layout.paint(item, sep, str):
            assert strip.cell_length == 50


def test_slash_parse_and_complete() -> None:
    assert slash.parse("/loss 0.2 0.1") == ("loss", "0.2 0.1")
    assert slash.parse("//not a command") is None
    assert slash.parse("hello") is None
    assert slash.complete("/ni") == "/nick "
    assert slash.complete("/o") is None  # /offline, /online: ambiguous, nothing to add
    assert slash.complete("/of") == "/offline "
    assert slash.complete("/x") is None
    assert [c.name for c in slash.matching("/o")] == ["offline", "online"]
    assert slash.parse_probability("20%") == pytest.approx(0.2)
    assert slash.parse_probability(".5") == 0.5
    with pytest.raises(slash.UsageError):  # the person's input, not a bug: a UserError the pane shows
        slash.parse_probability("1.5")
    with pytest.raises(slash.UsageError):
        slash.parse_ms("soon")


def test_ui_talks_only_to_the_node() -> None:
    root = Path(sdschat.ui.__file__).parent
    sources = sorted(root.rglob("*.py"))
    assert len(sources) > 10
    for source in sources:
        rel = source.relative_to(root)
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if not name.startswith("sdschat"):
                    continue
                assert name.startswith(("sdschat.node", "sdschat.ui")), f"sdschat/ui/{rel} imports {name}"


def test_the_ui_draws_up_to_240_frames_a_second_unless_the_person_sets_another_rate():
    # a message reaching the pane just after a frame waits for the next tick of Textual's frame timer: at most 4 ms
    code = "import sdschat.ui, textual.constants as c; print(c.MAX_FPS)"
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    rate = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert rate.stdout.strip() == "240"
    env["TEXTUAL_FPS"] = "30"
    rate = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert rate.stdout.strip() == "30"

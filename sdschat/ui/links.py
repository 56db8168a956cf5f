"""Links in messages: found in the text (``http://`` and ``https://`` only), painted as terminal hyperlinks by the
layout, and opened on request (``o`` on the message cursor) by a program of the person's: nothing is ever fetched
here.

Opening runs ``$SDSCHAT_OPENER`` (split like a shell would, the URL appended as one more argument), else
``xdg-open`` (``open`` on macOS) when it is on the ``PATH``: as a detached process, never through a shell, so a
URL's ``;`` or ``$(...)`` is text. Never Python's ``webbrowser``: it may start a text browser inside this very
terminal.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping

__all__ = ["find_links", "opener_command", "start_opener", "MAX_URL", "OPENER_VARIABLE"]

#: longer candidates are not links (nobody types one; a pasted blob is not something to open)
MAX_URL = 2000
OPENER_VARIABLE = "SDSCHAT_OPENER"

# a candidate starts at a scheme no letter, digit or "+.-" is glued to ("xhttps://", "git+https://" are not
# links) and runs to the next whitespace or a character URLs never hold ("<>`" and the double quote)
_CANDIDATE = re.compile(r"(?<![\w+.\-])https?://[^\s<>\"`]+", re.IGNORECASE)
# control characters, zero-width and bidi controls: a URL with one is refused, not cut (it would hide its end)
_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_TRAILING = ".,;:!?'\""
_CLOSERS = {")": "(", "]": "["}


def _trim(url: str) -> str:
    """``url`` without the sentence around it: trailing punctuation, and a closing bracket it did not open."""
    while url:
        last = url[-1]
        if last in _TRAILING:
            url = url[:-1]
        elif last in _CLOSERS and url.count(_CLOSERS[last]) < url.count(last):
            url = url[:-1]
        else:
            break
    return url


def _has_host(url: str) -> bool:
    rest = url.split("://", 1)[1]
    host = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    return any(ch.isalnum() for ch in host)


def find_links(text: str) -> list[tuple[int, int, str]]:
    """The ``http://`` and ``https://`` URLs in ``text``: ``(start, end, url)`` with ``text[start:end] == url``,
    in order. Trailing sentence punctuation (``.,;:!?'"``) and a closing ``)`` or ``]`` not opened inside the URL
    are left out ("(see https://x.org/a_(b))." gives ``https://x.org/a_(b)``); a candidate holding a control or
    invisible character, with no host, or longer than :data:`MAX_URL` is not a link."""
    if "://" not in text:  # (most messages: no regular expression at all)
        return []
    out: list[tuple[int, int, str]] = []
    for m in _CANDIDATE.finditer(text):
        url = _trim(m.group())
        if len(url) > MAX_URL or _BAD.search(url) or not _has_host(url):
            continue
        out.append((m.start(), m.start() + len(url), url))
    return out


def opener_command(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The program (and its arguments) that opens a link here: ``$SDSCHAT_OPENER`` split as a shell would (a
    :class:`ValueError` if its quoting is broken), else ``xdg-open`` (``open`` on macOS) found on the ``PATH``;
    None when there is none. Unset and empty are the same."""
    env = os.environ if env is None else env
    configured = env.get(OPENER_VARIABLE, "").strip()
    if configured:
        argv = shlex.split(configured)
        if not argv:
            raise ValueError(f"{OPENER_VARIABLE} names no program")
        return argv
    found = shutil.which("open" if sys.platform == "darwin" else "xdg-open", path=env.get("PATH", os.defpath))
    return [found] if found else None


def start_opener(argv: list[str], url: str) -> None:
    """Run ``argv`` with ``url`` as one more argument, detached: no shell, no terminal (its input and output are
    /dev/null, a session of its own so the window's signals never reach it), reaped by a thread when it ends.
    Raises :class:`OSError` when it cannot start."""
    proc = subprocess.Popen(
        [*argv, url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    threading.Thread(target=proc.wait, name="link-opener", daemon=True).start()

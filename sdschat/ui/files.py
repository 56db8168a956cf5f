"""Files the window writes that hold decrypted chat (``/export``, screenshots): readable by their owner only."""

from __future__ import annotations

from pathlib import Path

from sdschat.node.files import open_private

__all__ = ["open_private", "write_private_text"]


def write_private_text(path: str | Path, text: str) -> None:
    """``text`` into ``path``, created 0600 (or narrowed to it) whatever the umask (:func:`open_private`)."""
    with open_private(Path(path)) as f:
        f.write(text)

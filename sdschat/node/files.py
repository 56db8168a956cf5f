"""Files that hold decrypted chat (an export, a screenshot of the window): readable by their owner only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["open_private"]


def open_private(path: Path, mode: str = "w"):
    """``path`` opened for writing (``"w"`` text, UTF-8, or ``"wb"``), readable by its owner only: created 0600,
    or an existing regular file narrowed to 0600 before anything is written (a device such as ``/dev/stdout`` is
    left as it is). Raises :class:`OSError`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")
    except BaseException:
        os.close(fd)
        raise

"""Private files: folders 0700, files 0600 from their first byte, replaced atomically."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from .errors import ProfileError

__all__ = ["private_dir", "write_private", "remove_quietly"]


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700; tighten it if it exists."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise ProfileError(f"cannot create {path}: {exc.strerror or exc}") from None
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (0600) through a temporary file and an atomic rename."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with _quiet():
            tmp.unlink()
        raise ProfileError(f"cannot write {path}: {exc.strerror or exc}") from None


def remove_quietly(*paths: Path) -> None:
    for p in paths:
        with _quiet():
            p.unlink()


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        return kind is not None and issubclass(kind, OSError)

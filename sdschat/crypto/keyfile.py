"""Channel key files.

Format (ASCII text, two lines)::

    sdschat-key v1
    <standard base64 of the 32-byte channel secret>

Surrounding whitespace, CRLF line ends and blank lines are tolerated when
reading; anything else (other header, other version, bad base64, a key that is
not exactly 32 bytes, extra lines, non-ASCII, more than ``MAX_KEY_FILE_SIZE``
bytes) raises :class:`KeyFileError`.  Error messages name the file, never its
contents.

Key files are created with ``os.open(O_CREAT | O_EXCL, 0o600)`` so they are
never readable by others, not even for an instant; an existing file is only
replaced when ``overwrite=True`` (write to a new 0600 temporary file in the
same directory, then ``os.replace``).
"""

from __future__ import annotations

import base64
import binascii
import os

from .errors import KeyFileError

__all__ = [
    "KEY_FILE_HEADER",
    "KEY_SIZE",
    "MAX_KEY_FILE_SIZE",
    "format_key_file",
    "parse_key_file",
    "read_key_file",
    "write_key_file",
    "keygen",
    "key_file_is_private",
]

KEY_FILE_HEADER = "sdschat-key v1"
KEY_SIZE = 32
MAX_KEY_FILE_SIZE = 4096


def format_key_file(secret: bytes) -> bytes:
    """Serialize a 32-byte channel secret in key file format."""
    if len(secret) != KEY_SIZE:
        raise ValueError(f"channel secret must be {KEY_SIZE} bytes")
    return f"{KEY_FILE_HEADER}\n{base64.b64encode(bytes(secret)).decode('ascii')}\n".encode("ascii")


def parse_key_file(data: bytes, source: str = "key file") -> bytes:
    """Parse key file bytes; return the 32-byte secret or raise KeyFileError.

    ``source`` names the file in error messages.
    """
    if len(data) > MAX_KEY_FILE_SIZE:
        raise KeyFileError(f"{source}: too large to be a sdschat key file")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(f"{source}: not a sdschat key file (not ASCII text)") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise KeyFileError(f"{source}: empty key file")
    header = lines[0].split()
    if len(header) != 2 or header[0] != "sdschat-key":
        raise KeyFileError(f"{source}: not a sdschat key file (missing '{KEY_FILE_HEADER}' line)")
    if lines[0] != KEY_FILE_HEADER:
        raise KeyFileError(f"{source}: unsupported key file version (expected '{KEY_FILE_HEADER}')")
    if len(lines) != 2:
        raise KeyFileError(f"{source}: expected exactly one key line after the header")
    try:
        secret = base64.b64decode(lines[1], validate=True)
    except (binascii.Error, ValueError):
        raise KeyFileError(f"{source}: key is not valid base64") from None
    if len(secret) != KEY_SIZE:
        raise KeyFileError(f"{source}: key is {len(secret)} bytes, expected {KEY_SIZE}")
    return secret


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """Read and parse a key file; return the 32-byte secret.

    Raises :class:`KeyFileError` if the file is missing, unreadable or malformed.
    """
    name = os.fsdecode(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_KEY_FILE_SIZE + 1)
    except FileNotFoundError:
        raise KeyFileError(f"key file not found: {name}") from None
    except PermissionError:
        raise KeyFileError(f"cannot read key file {name}: permission denied") from None
    except IsADirectoryError:
        raise KeyFileError(f"cannot read key file {name}: is a directory") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {name}: {exc.strerror or type(exc).__name__}") from None
    return parse_key_file(data, name)


def _create_exclusive(path: str, data: bytes) -> None:
    """Create ``path`` (must not exist) with mode 0600 and write ``data``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def write_key_file(path: str | os.PathLike[str], secret: bytes, *, overwrite: bool = False) -> None:
    """Write ``secret`` to a new key file at ``path`` with mode 0600.

    Refuses to replace an existing file unless ``overwrite`` is true.  Raises
    :class:`KeyFileError` on any failure (including "already exists").
    """
    data = format_key_file(secret)
    target = os.fspath(path)
    name = os.fsdecode(target)
    if not overwrite:
        try:
            _create_exclusive(target, data)
        except FileExistsError:
            raise KeyFileError(f"key file already exists: {name} (refusing to overwrite)") from None
        except OSError as exc:
            raise KeyFileError(f"cannot write key file {name}: {exc.strerror or type(exc).__name__}") from None
        return
    directory, base = os.path.split(os.path.abspath(target))
    tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
    try:
        _create_exclusive(tmp, data)
        try:
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as exc:
        raise KeyFileError(f"cannot write key file {name}: {exc.strerror or type(exc).__name__}") from None


def keygen(path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Create a key file holding a fresh random 32-byte secret (``os.urandom``)."""
    write_key_file(path, os.urandom(KEY_SIZE), overwrite=overwrite)


def key_file_is_private(path: str | os.PathLike[str]) -> bool:
    """False if the key file has any group or other permission bit set.

    Meant for a warning ("key file is readable by others"), not an error.
    Always true on non-POSIX systems, where the mode bits mean nothing.
    Raises :class:`KeyFileError` if the file cannot be stat'ed.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise KeyFileError(f"cannot stat key file {os.fsdecode(path)}: {exc.strerror or type(exc).__name__}") from None
    if os.name != "posix":
        return True
    return mode & 0o077 == 0

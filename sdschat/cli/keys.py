"""``sdschat keygen``: a fresh random channel key file."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import CliError

__all__ = ["keygen_configure", "keygen_run"]


def keygen_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="where to write the key file (created with mode 0600)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")


def keygen_run(args: argparse.Namespace) -> int:
    from sdschat.crypto import CryptoError, keygen

    try:
        keygen(args.path, overwrite=args.force)
    except CryptoError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote a new channel key to {args.path} (mode 0600); share it only with the channel's members")
    return 0

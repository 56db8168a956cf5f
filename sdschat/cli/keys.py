"""``sdschat keygen``: a fresh random channel key file."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["keygen_configure", "keygen_run"]


def keygen_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="where to write the key file (created with mode 0600)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")


def keygen_run(args: argparse.Namespace) -> int:
    from sdschat.crypto import keygen

    keygen(args.path, overwrite=args.force)  # a file there already: a CryptoError, one line (cli/main.py)
    print(f"wrote a new channel key to {args.path} (mode 0600); share it only with the channel's members")
    return 0

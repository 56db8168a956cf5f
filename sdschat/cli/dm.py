"""``sdschat dm NAME``: a two-member channel with a member of one of your channels, who is asked in their window
(no token changes hands; see :mod:`sdschat.cli.direct`)."""

from __future__ import annotations

import argparse

from .args import add_home_arg
from .errors import CliError
from .profiles import broker_failure, load_profile

__all__ = ["dm_configure", "dm_run"]


def dm_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a member of one of your channels: a nick, or nick#3f2a as the window shows it")
    add_home_arg(p)


async def dm_run(args: argparse.Namespace) -> int:
    """Open a two-member channel with NAME and send them the request; one line says where to talk."""
    from sdschat.node.inbox import channel_label

    from .window import ProfileClient

    profile = load_profile(args)
    if not profile.channels:
        raise CliError("you share no channel with anyone yet: `sdschat new NAME` or `sdschat join TOKEN` first")
    try:
        client = await ProfileClient.start(profile)
    except Exception as exc:
        from sdschat.store import StoreError
        from sdschat.transport import TransportError

        if isinstance(exc, (TransportError, StoreError)):
            raise broker_failure(exc, profile.broker) from None
        raise
    try:
        node, contact, new = await client.query(args.name)
    finally:
        await client.stop()
    what = "asked" if new else "asked again"
    label = channel_label(node.key.channel_name, profile.name)
    print(f"{label}: {what} {contact.name} to talk; open `sdschat` to chat there")
    return 0

"""Bare ``sdschat``: the profile's channels in one window (creating the profile on first run)."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import CliError
from .profiles import load_profile
from .wiring import stop_all

__all__ = ["ProfileClient", "window_run", "first_run"]

FIRST_CHANNEL = "general"


class ProfileClient:
    """The window's channels: one node per joined channel of the profile; joins and parts go to the profile."""

    def __init__(self, profile, nodes: list) -> None:
        self.profile = profile
        self.nodes = nodes

    @classmethod
    async def start(cls, profile) -> ProfileClient:
        client = cls(profile, [])
        try:
            for entry in list(profile.channels.values()):
                client.nodes.append(await client._start(entry))
        except BaseException:
            await client.stop()
            raise
        return client

    async def _start(self, entry):
        from sdschat.node import Node, NodeConfig, node_channel_config

        db = self.profile.db_path(entry)
        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = NodeConfig(nick=self.profile.name, key=self.profile.key(entry), db_path=db,
                            broker_url=self.profile.broker or None, channel_config=node_channel_config())
        return await Node.start(config)

    async def join(self, text: str):
        """``text`` is an invite token (``sdschat:...``) or the name of a new channel; returns its node."""
        from sdschat.profile import TOKEN_PREFIX, decode_invite

        if text.startswith(TOKEN_PREFIX):
            invite = decode_invite(text)
            entry = self.profile.add_channel(invite.channel, invite.secret)
        else:
            entry = self.profile.add_channel(text, os.urandom(32))
        try:
            node = await self._start(entry)
        except BaseException:
            self.profile.remove_channel(entry.name, forget=True)
            raise
        self.nodes.append(node)
        return node

    async def part(self, node) -> None:
        self.nodes.remove(node)
        await node.stop()
        self.profile.remove_channel(node.key.channel_name)

    def invite(self, node) -> str:
        from sdschat.profile import encode_invite

        return encode_invite(self.profile.invite(node.key.channel_name))

    def set_nick(self, nick: str) -> None:
        for node in self.nodes:
            if node.nick != nick:
                node.set_nick(nick)
        self.profile.name = nick
        self.profile.save()

    async def stop(self) -> None:
        await stop_all(self.nodes)


def first_run(args: argparse.Namespace):
    """The profile; on first run, ask for a name on the terminal and create it with a first channel."""
    from sdschat.profile import Profile, ProfileError, resolve_paths

    paths = resolve_paths(getattr(args, "home", None))
    if not Profile.exists(paths):
        if not sys.stdin.isatty():
            raise CliError("no profile yet: run `sdschat init --name NAME` (no terminal to ask on)")
        print(f"sdschat: no profile at {paths.profile_file}; let's make one.", file=sys.stderr)
        try:
            name = input("your name: ").strip()
            profile = Profile.create(paths, name)
        except (EOFError, KeyboardInterrupt):
            raise CliError("no profile created") from None
        except ProfileError as exc:
            raise CliError(str(exc)) from None
    profile = load_profile(args)
    if not profile.channels:
        profile.add_channel(FIRST_CHANNEL, os.urandom(32))
        print(f"sdschat: created #{FIRST_CHANNEL} to start with; /join NAME or /join TOKEN for more",
              file=sys.stderr)
    return profile


async def window_run(args: argparse.Namespace) -> int:
    from sdschat.store import StoreError
    from sdschat.transport import TransportError
    from sdschat.ui.window import ChannelWindow

    if not sys.stdout.isatty():
        raise CliError("sdschat needs a terminal (stdout is not a tty); for scripts use `sdschat bot`")
    profile = first_run(args)
    try:
        client = await ProfileClient.start(profile)
    except (TransportError, StoreError) as exc:
        raise CliError(str(exc)) from None
    try:
        app = ChannelWindow(client)
        await app.run_async()
    finally:
        await client.stop()
    failures = [f"#{n.key.channel_name}: {n.failure}" for n in client.nodes if n.failure]
    if failures:
        raise CliError("; ".join(failures), code=1)
    return int(app.return_code or 0)

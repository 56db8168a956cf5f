"""The profile's notification settings (bell, desktop, highlight words) and per-channel mutes survive a save."""

from __future__ import annotations

import pytest

from sdschat.profile import Profile, ProfileError, resolve_paths


def test_notification_settings_and_mutes_round_trip(tmp_path) -> None:
    paths = resolve_paths(tmp_path)
    profile = Profile.create(paths, "alice")
    profile.notifications.highlight = ("deploy", 'on "call"')
    profile.notifications.desktop = False
    profile.save()
    profile.add_channel("team", bytes(32))
    profile.set_muted("team", True)
    again = Profile.load(paths)
    assert again.notifications.highlight == ("deploy", 'on "call"') and not again.notifications.desktop
    assert again.channel("team").muted
    text = paths.profile_file.read_text().replace('highlight = ["deploy", "on \\"call\\""]', "highlight = 3")
    paths.profile_file.write_text(text)
    with pytest.raises(ProfileError, match="damaged"):
        Profile.load(paths)


def test_events_window_setting_round_trips_reaches_the_node_config_and_refuses_nonsense(tmp_path) -> None:
    from sdschat.cli.wiring import profile_node_config

    paths = resolve_paths(tmp_path)
    profile = Profile.create(paths, "alice")
    assert "[storage]" in paths.profile_file.read_text() and profile.events_keep == 10_000
    profile.events_keep = 500
    profile.save()
    again = Profile.load(paths)
    assert again.events_keep == 500
    again.add_channel("team", bytes(32))
    assert profile_node_config(again, again.channel("team")).events_keep == 500
    for bad in ("-1", '"many"', "1.5"):
        paths.profile_file.write_text(
            paths.profile_file.read_text().replace(f"events_keep = {again.events_keep}", f"events_keep = {bad}")
        )
        with pytest.raises(ProfileError, match=r"\[storage\] events_keep must be a whole number"):
            Profile.load(paths)
        again.save()


def test_rekey_days_round_trips_refuses_nonsense_and_makes_an_admins_node_rotate(tmp_path) -> None:
    """``rekey_days`` under ``[security]`` in profile.toml: written (0, never, by default), read back, refused
    when it is no number of days, carried by profile_node_config into the node's configuration, and acted on:
    an admin's node started from the profile rotates the key (here every 1.7 s) and another member takes it."""
    import asyncio
    import time

    from brokers import Mosquitto, mosquitto_binary
    from node_helpers import FAST, run

    from sdschat.cli.wiring import profile_node_config
    from sdschat.crypto import Identity
    from sdschat.node import Node, NodeConfig, node_channel_config

    paths = resolve_paths(tmp_path / "alice")
    profile = Profile.create(paths, "alice")
    assert profile.rekey_days == 0 and "[security]\n" in paths.profile_file.read_text()
    assert "\nrekey_days = 0\n" in paths.profile_file.read_text()
    entry = profile.add_channel("team", bytes(range(32)))
    assert profile_node_config(profile, entry).rekey_every_ms == 0  # never, unless asked
    # a person edits the file
    paths.profile_file.write_text(paths.profile_file.read_text().replace("rekey_days = 0", "rekey_days = 7"))
    again = Profile.load(paths)
    assert again.rekey_days == 7 and profile_node_config(again, again.channel("team")).rekey_every_ms == 7 * 86_400_000
    again.rekey_days = 2e-5  # 1.728 s
    again.save()
    again = Profile.load(paths)
    assert again.rekey_days == 2e-5 and again.rekey_every_ms == 1_728
    good = paths.profile_file.read_text()
    for bad in ("-1", "3651", '"weekly"', "true", "nan", "inf"):
        paths.profile_file.write_text(good.replace("rekey_days = 2e-05", f"rekey_days = {bad}"))
        with pytest.raises(ProfileError, match=r"\[security\] rekey_days must be a number of days"):
            Profile.load(paths)
    paths.profile_file.write_text(good)

    (tmp_path / "mosquitto").mkdir()
    broker = Mosquitto(mosquitto_binary(), tmp_path / "mosquitto")
    broker.start()

    async def main():
        profile = Profile.load(paths)
        entry = profile.channel("team")
        cfg = profile_node_config(profile, entry, broker_url=broker.url, channel_config=node_channel_config(**FAST))
        assert cfg.rekey_every_ms == 1_728 and cfg.membership
        a = await Node.start(cfg)
        b = await Node.start(
            NodeConfig(
                "bob",
                profile.key(entry),
                tmp_path / "bob.db",
                broker.url,
                channel_config=node_channel_config(**FAST),
                identity=Identity.generate(),
                membership=True,
                admins=(profile.participant_id,),
            )
        )
        try:
            assert a.membership.is_admin and not b.membership.is_admin
            t0 = time.monotonic()
            while b.membership.current.number < 1:
                assert time.monotonic() - t0 < 20, "no rotation"
                await asyncio.sleep(0.05)
            took = b.membership.current
            assert took.author == a.participant_id  # alice's node rotated on its own: nobody called /rekey
            assert took.secret == next(e.secret for e in a.membership.epochs if e.number == took.number)
        finally:
            await a.stop()
            await b.stop()

    try:
        run(main(), 40)
    finally:
        broker.close()

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
        paths.profile_file.write_text(paths.profile_file.read_text().replace(
            f"events_keep = {again.events_keep}", f"events_keep = {bad}"))
        with pytest.raises(ProfileError, match=r"\[storage\] events_keep must be a whole number"):
            Profile.load(paths)
        again.save()

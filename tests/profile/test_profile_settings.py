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

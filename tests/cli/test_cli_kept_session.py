"""The window's kept broker session: what is sent while the window is closed waits at the broker (mosquitto,
MQTT 5 session expiry, QoS 1) and arrives when it opens again, with no store node and the sender gone; one
process at a time holds the profile's session; its id says nothing of the member."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import pytest
from brokers import Mosquitto, mosquitto_binary

from sdschat.cli.window import ProfileClient
from sdschat.profile import Profile, ProfileError, resolve_paths
from sdschat.profile.session import claim_session


@pytest.fixture(scope="module")
def mosq(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("kept-session-mosquitto"))
    broker.start()
    yield broker
    broker.close()


def profiles(tmp_path, url: str, keep_days: float = 7.0) -> tuple[Profile, Profile]:
    secret = os.urandom(32)
    out = []
    for who in ("alice", "bob"):
        profile = Profile.create(resolve_paths(tmp_path / who), who, url)
        profile.session_days = keep_days if who == "bob" else 0.0
        profile.save()
        profile.add_channel("team", secret)
        out.append(Profile.load(profile.paths))
    return out[0], out[1]


def chat(node) -> list[str]:
    return [m.text for m in node.messages() if m.kind == "msg"]


async def away_and_back(alice: Profile, bob: Profile, lines: int = 30) -> tuple[list[str], float]:
    """bob's window opens and closes; alice writes ``lines`` lines and leaves; bob's window opens again (as the
    window does: the first channel, then the others). Returns what bob shows after 5 s, and when it was whole."""
    window = await ProfileClient.start(bob, all_channels=False)
    await window.start_others(lambda node: None, lambda name, reason: None)
    await window.stop()
    writer = await ProfileClient.start(alice)
    try:
        for i in range(lines):
            await writer.nodes[0].send_text(f"while bob was away {i}")
        await writer.nodes[0].writer.flush()
        await asyncio.sleep(0.5)
    finally:
        await writer.stop()  # alice is gone too: nobody can resend or repair
    t0 = time.monotonic()
    window = await ProfileClient.start(Profile.load(bob.paths), all_channels=False)
    try:
        await window.start_others(lambda node: None, lambda name, reason: None)
        node = window.nodes[0]
        whole = None
        while time.monotonic() - t0 < 5:
            if len(chat(node)) >= lines and whole is None:
                whole = time.monotonic() - t0
                break
            await asyncio.sleep(0.05)
        return chat(node), whole if whole is not None else float("inf")
    finally:
        await window.stop()


def test_what_was_sent_while_the_window_was_closed_arrives_from_the_broker(mosq, tmp_path):
    alice, bob = profiles(tmp_path, mosq.url)
    shown, whole = asyncio.run(asyncio.wait_for(away_and_back(alice, bob), 60))
    assert shown == [f"while bob was away {i}" for i in range(30)]  # all, in order
    assert whole < 3.0, whole


def test_without_a_kept_session_nothing_arrives_while_the_sender_is_gone(mosq, tmp_path):
    alice, bob = profiles(tmp_path, mosq.url, keep_days=0)
    shown, _ = asyncio.run(asyncio.wait_for(away_and_back(alice, bob), 60))
    assert shown == []  # (what the kept session is for: no store node, the sender gone)


def test_the_session_id_is_private_random_and_held_by_one_process_at_a_time(tmp_path):
    profile = Profile.create(resolve_paths(tmp_path / "carol"), "carol")
    made = (profile.paths.data / "session.id").read_text().strip()  # (made with the profile)
    first = claim_session(profile.paths.data)
    assert first is not None and first.client_id == made
    assert first is not None and first.client_id.startswith("sdschat-") and len(first.client_id) == 24
    file = profile.paths.data / "session.id"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    pid = profile.participant_id
    assert pid[:8] not in first.client_id and "carol" not in first.client_id
    assert claim_session(profile.paths.data) is None  # a second window connects afresh
    first.release()
    again = claim_session(profile.paths.data)
    assert again is not None and again.client_id == first.client_id  # the same session next time
    again.release()
    file.write_text("damaged\n")
    fresh = claim_session(profile.paths.data)
    assert fresh is not None and fresh.client_id != first.client_id and fresh.client_id.startswith("sdschat-")
    fresh.release()


def test_keep_days_is_read_and_checked(tmp_path):
    profile = Profile.create(resolve_paths(tmp_path / "dan"), "dan")
    assert Profile.load(profile.paths).session_days == 7 and profile.session_expiry_s == 7 * 86_400
    text = profile.paths.profile_file.read_text()
    assert "[session]" in text and "keep_days = 7" in text
    profile.paths.profile_file.write_text(text.replace("keep_days = 7", "keep_days = 0.5"))
    assert Profile.load(profile.paths).session_expiry_s == 43_200
    for bad in ('"soon"', "-1", "400"):
        profile.paths.profile_file.write_text(text.replace("keep_days = 7", f"keep_days = {bad}"))
        with pytest.raises(ProfileError, match="keep_days"):
            Profile.load(profile.paths)

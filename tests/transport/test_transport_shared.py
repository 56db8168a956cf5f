"""One connection for many channels: topic views over a real broker (mosquitto and the embedded one)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from brokers import fast_transport
from run_until import run, until

from sdschat.transport import ConnectionState, ImpairedTransport, MqttTransport, SharedConnection

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"),
]


def test_views_see_only_their_topics_over_one_connection(broker: Any) -> None:
    async def main() -> None:
        t1, t2 = (f"sdschat-test/{uuid.uuid4().hex}" for _ in range(2))
        shared = SharedConnection(fast_transport(broker.url))
        await shared.start()
        one, two = shared.view(), shared.view()
        got: dict[str, list] = {"one": [], "two": []}
        one.set_message_handler(lambda t, p: got["one"].append((t, p)))
        two.set_message_handler(lambda t, p: got["two"].append((t, p)))
        for view, topic in ((one, t1), (two, t2)):
            await view.start()
            assert view.state is ConnectionState.CONNECTED
            assert await view.subscribe(topic) is True
        async with fast_transport(broker.url) as other:
            for i in range(5):
                await other.publish(t1, b"to one %d" % i)
                await other.publish(t2, b"to two %d" % i)
            await until(lambda: len(got["one"]) == 5 and len(got["two"]) == 5)
            assert got["one"] == [(t1, b"to one %d" % i) for i in range(5)]
            assert got["two"] == [(t2, b"to two %d" % i) for i in range(5)]
            # publishing through a view goes out on the shared connection
            seen = []
            other.set_message_handler(lambda t, p: seen.append(p))
            await other.subscribe(t1)
            assert await two.publish(t1, b"from two") is True
            await until(lambda: seen == [b"from two"])
            assert shared.transport.stats.published == 1
            # leaving one channel keeps the connection (and the other channel) up
            await one.stop()
            assert one.state is ConnectionState.STOPPED and two.state is ConnectionState.CONNECTED
            assert shared.topics == [t2]
            await other.publish(t1, b"nobody")
            await other.publish(t2, b"still here")
            await until(lambda: got["two"][-1] == (t2, b"still here"))
            assert len(got["one"]) == 5  # "nobody" was published before "still here": it is not coming
        await two.stop()
        await shared.stop()
        assert shared.transport.state is ConnectionState.STOPPED

    run(main())


def test_a_view_can_be_impaired_without_touching_the_others(broker: Any) -> None:
    async def main() -> None:
        topic = f"sdschat-test/{uuid.uuid4().hex}"
        shared = SharedConnection(fast_transport(broker.url))
        await shared.start()
        clean, lossy = shared.view(), ImpairedTransport(shared.view(), loss_in=1.0)
        got = {"clean": 0, "lossy": 0}
        clean.set_message_handler(lambda t, p: got.__setitem__("clean", got["clean"] + 1))
        lossy.set_message_handler(lambda t, p: got.__setitem__("lossy", got["lossy"] + 1))
        for v in (clean, lossy):
            await v.start()
            await v.subscribe(topic)
        async with fast_transport(broker.url) as other:
            for _ in range(10):
                await other.publish(topic, b"x")
            await until(lambda: got["clean"] == 10)
            await asyncio.sleep(0.1)
            assert got["lossy"] == 0 and lossy.counters.dropped_in == 10
            assert lossy.stats is shared.transport.stats  # attributes of the connection come through
        for v in (clean, lossy):
            await v.stop()
        await shared.stop()

    run(main())


def test_over_a_kept_session_what_the_broker_queued_waits_for_its_view_and_closing_keeps_the_topics(
    mosquitto: Any,
) -> None:
    """A window's connection: its views stop when it quits, but after ``closing()`` the kept topics stay
    subscribed at the broker (a left channel's topic does not); on the next start the broker sends what it
    queued before any view subscribes: it is held and handed to the view that subscribes to its topic. What
    no view claims is dropped, and its topic unsubscribed, on ``settled()``; after it nothing more is held."""
    kept_topic, left_topic, other_topic = (f"sdschat-test/{uuid.uuid4().hex}" for _ in range(3))
    client_id = f"sdschat-{uuid.uuid4().hex[:16]}"

    def connection() -> SharedConnection:
        return SharedConnection(
            MqttTransport(mosquitto.url, client_id=client_id, qos=1, session_expiry_s=60),
            keep=lambda t: t != left_topic,
            hold=True,
        )

    async def main() -> None:
        shared = connection()
        await shared.start()
        views = [shared.view() for _ in range(3)]
        for view, topic in zip(views, (kept_topic, left_topic, other_topic)):
            await view.start()
            assert await view.subscribe(topic) is True
        shared.closing()
        for view in views:
            await view.stop()
        await shared.stop()
        async with MqttTransport(mosquitto.url, qos=1) as sender:
            for i in range(10):
                for topic in (kept_topic, left_topic, other_topic):
                    await sender.publish(topic, b"%s %d" % (topic[-4:].encode(), i))
            await asyncio.sleep(0.3)
        shared = connection()
        await shared.start()
        await until(lambda: sum(map(len, shared._held.values())) == 20)
        assert sorted(shared.held_topics()) == sorted([kept_topic, other_topic])  # not the left one
        view = shared.view()
        got: list[bytes] = []
        view.set_message_handler(lambda t, p: got.append(p))
        await view.start()
        await view.subscribe(kept_topic)
        assert got == [b"%s %d" % (kept_topic[-4:].encode(), i) for i in range(10)]  # at once, in order
        shared.settled()
        assert shared.held_topics() == [] and shared.unrouted == 10
        async with MqttTransport(mosquitto.url, qos=1) as sender:  # (other_topic is no longer subscribed)
            await sender.publish(kept_topic, b"live")
            await until(lambda: got[-1] == b"live")
        await view.stop()
        await shared.stop()

    run(main())

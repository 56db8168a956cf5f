"""ImpairedTransport over real brokers: loss, duplication, delay/reorder, offline."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from run_until import run, until

from sdschat.transport import ConnectionState, ImpairedTransport, Impairment, MqttTransport, Transport

pytestmark = pytest.mark.timeout(20)


@asynccontextmanager
async def link(
    url: str, sender_kw: dict[str, Any] | None = None, receiver_kw: dict[str, Any] | None = None
) -> AsyncIterator[tuple[ImpairedTransport, ImpairedTransport, str]]:
    """Two impaired transports; the receiver is subscribed to the returned topic."""
    topic = f"sdschat-test/{uuid.uuid4().hex}"
    sender = ImpairedTransport(MqttTransport(url), **(sender_kw or {"seed": 1}))
    receiver = ImpairedTransport(MqttTransport(url), **(receiver_kw or {"seed": 2}))
    await sender.start()
    await receiver.start()
    try:
        assert await receiver.subscribe(topic)
        yield sender, receiver, topic
    finally:
        await sender.stop()
        await receiver.stop()


async def take(t: Transport | ImpairedTransport, n: int, timeout: float = 5.0) -> list[bytes]:
    return [(await asyncio.wait_for(t.receive(), timeout)).payload for _ in range(n)]  # type: ignore[union-attr]


def test_loss_out_one_drops_all_and_zero_drops_none(broker: Any) -> None:
    async def main() -> None:
        async with link(broker.url, sender_kw={"seed": 7, "loss_out": 1.0}) as (tx, rx, topic):
            for i in range(20):
                assert await tx.publish(topic, b"lost-%d" % i) is True  # lost on the wire, silently
            assert tx.counters.dropped_out == 20 and tx.counters.passed_out == 0
            tx.set(loss_out=0.0)
            for i in range(20):
                assert await tx.publish(topic, b"kept-%d" % i) is True
            # same connection, in order: if any lost frame had gone out it would come first
            assert await take(rx, 20) == [b"kept-%d" % i for i in range(20)]
            assert tx.counters.dropped_out == 20 and tx.counters.passed_out == 20

    run(main())


def test_loss_in_one_drops_all(broker: Any) -> None:
    async def main() -> None:
        async with link(broker.url, receiver_kw={"seed": 3, "loss_in": 1.0}) as (tx, rx, topic):
            for i in range(20):
                await tx.publish(topic, b"x%d" % i)
            await until(lambda: rx.counters.dropped_in == 20)
            rx.set(loss_in=0)
            await tx.publish(topic, b"marker")
            assert await take(rx, 1) == [b"marker"]
            assert rx.counters.passed_in == 1

    run(main())


def test_seeded_loss_is_reproducible(broker: Any) -> None:
    async def main() -> None:
        n, seed = 60, 42
        async with link(broker.url, receiver_kw={"seed": seed, "loss_in": 0.5}) as (tx, rx, topic):
            for i in range(n):
                await tx.publish(topic, b"%d" % i)
            expected_rng = random.Random(seed)
            expected = [b"%d" % i for i in range(n) if not expected_rng.random() < 0.5]
            await until(lambda: rx.counters.dropped_in + rx.counters.passed_in == n)
            got = await take(rx, len(expected))
            assert got == expected
            assert 0 < rx.counters.dropped_in < n

    run(main())


def test_duplicate_one_doubles(broker: Any) -> None:
    async def main() -> None:
        async with link(broker.url, sender_kw={"seed": 5, "duplicate": 1.0}) as (tx, rx, topic):
            for i in range(10):
                assert await tx.publish(topic, b"d%d" % i)
            got = await take(rx, 20)
            assert got == [b"d%d" % (i // 2) for i in range(20)]
            assert tx.counters.duplicated == 10
            # inbound duplication too
            tx.set(duplicate=0)
            rx.set(duplicate=1.0)
            await tx.publish(topic, b"once")
            assert await take(rx, 2) == [b"once", b"once"]
            assert rx.counters.duplicated == 1

    run(main())


def test_offline_blocks_both_ways(broker: Any) -> None:
    async def main() -> None:
        async with link(broker.url) as (tx, rx, topic):
            states: list[tuple[ConnectionState, str]] = []
            tx.add_state_listener(lambda c: states.append((c.state, c.detail)))
            # sender unplugged: publishes are refused, state shows it
            tx.set(offline=True)
            assert tx.state is ConnectionState.DISCONNECTED
            assert tx.inner.state is ConnectionState.CONNECTED  # the real connection stays up
            assert await tx.publish(topic, b"nope") is False
            assert tx.counters.dropped_out == 1
            tx.set(offline=False)
            assert tx.state is ConnectionState.CONNECTED
            assert states[0] == (ConnectionState.DISCONNECTED, "offline (impairment)")
            assert states[-1][0] is ConnectionState.CONNECTED
            # receiver unplugged: incoming frames are discarded
            rx.set(offline=True)
            for i in range(5):
                assert await tx.publish(topic, b"gone-%d" % i)
            await until(lambda: rx.counters.dropped_in == 5)
            rx.set(offline=False)
            await tx.publish(topic, b"back")
            assert await take(rx, 1) == [b"back"]

    run(main())


def test_delay_with_jitter_reorders(broker: Any) -> None:
    async def main() -> None:
        n = 30
        kw = {"seed": 11, "delay_ms": 30, "jitter_ms": 25}
        async with link(broker.url, receiver_kw=kw) as (tx, rx, topic):
            t0 = time.monotonic()
            for i in range(n):
                await tx.publish(topic, b"%02d" % i)
            got = await take(rx, n)
            assert sorted(got) == [b"%02d" % i for i in range(n)]  # nothing lost
            assert got != sorted(got)  # but reordered
            assert rx.counters.delayed == n
            assert time.monotonic() - t0 >= 0.005

    run(main())


def test_outbound_delay_reorders(broker: Any) -> None:
    async def main() -> None:
        n = 30
        async with link(broker.url, sender_kw={"seed": 4, "delay_ms": 20, "jitter_ms": 20}) as (tx, rx, topic):
            for i in range(n):
                assert await tx.publish(topic, b"%02d" % i)  # returns at once
            got = await take(rx, n)
            assert sorted(got) == [b"%02d" % i for i in range(n)] and got != sorted(got)
            assert tx.counters.delayed == n and tx.counters.passed_out == n

    run(main())


def test_settings_validation_and_stop_cancels_pending(mosquitto: Any) -> None:
    async def main() -> None:
        t = ImpairedTransport(MqttTransport(mosquitto.url), seed=0)
        assert t.settings == Impairment() and not t.settings.active
        with pytest.raises(ValueError, match="unknown impairment setting"):
            t.set(loss=0.5)
        with pytest.raises(ValueError):
            t.set(loss_in=1.5)
        with pytest.raises(ValueError):
            t.set(delay_ms=-1)
        with pytest.raises(ValueError):
            t.set(offline="yes")
        assert t.settings == Impairment()  # nothing changed
        s = t.set(loss_in=0.25, jitter_ms=10)
        assert s.loss_in == 0.25 and s.jitter_ms == 10 and s.active
        await t.start()
        assert t.stats.connects == 1  # forwarded to the inner transport
        t.set(delay_ms=10_000)
        assert await t.publish("x/y", b"held")  # queued for 10 s
        await t.stop()  # must not wait for it
        assert t.state is ConnectionState.STOPPED
        assert t.reset() == Impairment()

    run(main(), timeout=5)

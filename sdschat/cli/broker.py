"""``sdschat broker``: an embedded MQTT broker in the foreground."""

from __future__ import annotations

import argparse

from .args import positive_int

__all__ = ["broker_configure", "broker_run"]


def broker_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=positive_int, default=1883)


async def broker_run(args: argparse.Namespace) -> int:
    from sdschat.transport import run_broker

    def ready(broker) -> None:
        print(f"sdschat broker listening on {broker.url} (Ctrl-C to stop)", flush=True)

    await run_broker(args.host, args.port, on_ready=ready)  # a port taken: a TransportError, one line (cli/main.py)
    return 0

"""``StoreWriter``: group commits of store batches.

``submit(...)`` is synchronous and never blocks: it queues a batch (journal ops
plus application rows) and, if no flush is running, starts a flush task. The
task waits up to ``coalesce_ms`` (0: not at all, its first step runs on the
next turn of the event loop), so everything submitted meanwhile (and while a
previous flush is still in the database thread) is committed together in ONE
transaction (:meth:`Store.apply_batches`), batches in submit order. A busy
channel then pays one commit for several messages instead of one each: every
commit writes each page it touched to the write-ahead log again.

``await flush()`` returns once every batch submitted before the call is
committed; it cuts the wait short. The node awaits it before publishing
anything, so a message, and every state an acknowledgement it carries speaks
for, is durable before anyone can see it.

Errors are never swallowed. A failed flush rolls its transaction back, drops
the batches queued so far, stores the error, passes it to ``on_error`` (if
given), fails every waiting ``flush()``, and makes every later ``submit()``
and ``flush()`` raise :class:`WriterFailedError` (its ``__cause__`` is the
original exception). The store then no longer mirrors the engine; the owner
re-saves the full state (``Store.save_state(channel.snapshot(), ...)``) and
calls :meth:`reset`.

Not thread-safe: call it from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from sdschat.sds.state import JournalOp

from .errors import StoreError, WriterFailedError
from .journal import Batch, batch_meta
from .rows import EVENT_KINDS, EventRow, MessageRow, MessageUpdate, ParticipantRow
from .store import Store

__all__ = ["StoreWriter"]

log = logging.getLogger("sdschat.store")


class StoreWriter:
    def __init__(
        self,
        store: Store,
        *,
        on_error: Callable[[WriterFailedError], None] | None = None,
        coalesce_ms: float = 0.0,
    ) -> None:
        if coalesce_ms < 0:
            raise ValueError(f"coalesce_ms must be 0 or more, not {coalesce_ms!r}")
        self.store = store
        self.on_error = on_error
        #: how long a flush waits for more batches before it commits (flush() cuts it short)
        self.coalesce_s = coalesce_ms / 1000
        self._hurry: asyncio.Future[None] | None = None  # resolved by flush(): the waiting flush commits now
        self._pending: list[Batch] = []
        self._submitted = 0  # batches submitted
        self._committed = 0  # batches committed (or dropped by a failure: see _fail)
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._error: BaseException | None = None
        self._closed = False
        #: transactions committed by this writer
        self.flushes = 0
        #: largest number of batches committed in one transaction
        self.max_batches_per_flush = 0

    # ------------------------------------------------------------------ API

    @property
    def pending(self) -> int:
        """Batches submitted but not yet committed."""
        return self._submitted - self._committed

    @property
    def error(self) -> BaseException | None:
        """The original exception of the failed flush, or None."""
        return self._error

    def submit(
        self,
        channel_id: str,
        ops: Iterable[JournalOp] = (),
        *,
        messages: Iterable[MessageRow] = (),
        message_updates: Iterable[MessageUpdate] = (),
        events: Iterable[EventRow] = (),
        participants: Iterable[ParticipantRow] = (),
        last_activity: int | None = None,
        sync_counter: int | None = None,
        next_sync_at: int | None = None,
    ) -> None:
        """Queue one batch (same arguments as :meth:`Store.apply`); it commits on a coming loop turn."""
        self._raise_if_failed()
        if self._closed:
            raise StoreError("writer is closed")
        events = list(events)
        for e in events:  # refuse bad rows here, not later in the background
            if e.kind not in EVENT_KINDS:
                raise ValueError(f"unknown event kind {e.kind!r}")
        meta = batch_meta(last_activity, sync_counter, next_sync_at)
        loop = asyncio.get_running_loop()
        self._pending.append(
            (channel_id, list(ops), list(messages), list(message_updates), events, list(participants), meta)
        )
        self._submitted += 1
        if self._task is None:
            self._task = loop.create_task(self._run(), name="sdschat-store-writer")

    async def flush(self) -> None:
        """Return once everything submitted so far is committed; raise if a flush failed."""
        self._raise_if_failed()
        target = self._submitted
        if self._committed >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        if self._hurry is not None:
            _resolve(self._hurry)
        await fut

    async def close(self) -> None:
        """Flush, then refuse further submits (the store itself stays open)."""
        try:
            await self.flush()
        finally:
            self._closed = True

    def reset(self) -> None:
        """Forget a failure (after the owner re-saved the full state) so the writer can be used again."""
        self._error = None

    # ------------------------------------------------------------ internals

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise WriterFailedError(self._error) from self._error

    async def _run(self) -> None:
        try:
            if self.coalesce_s > 0 and not self._waiters:
                loop = asyncio.get_running_loop()
                hurry = self._hurry = loop.create_future()
                timer = loop.call_later(self.coalesce_s, _resolve, hurry)  # (asyncio.wait: a task's worth more)
                try:
                    await hurry
                finally:
                    timer.cancel()
                    self._hurry = None
            while self._pending and self._error is None:
                batches, self._pending = self._pending, []
                try:
                    await self.store.apply_batches(batches)
                except asyncio.CancelledError:
                    self._fail(StoreError("store writer cancelled during a flush"), len(batches))
                    raise
                except Exception as exc:
                    self._fail(exc, len(batches))
                    return
                self._committed += len(batches)
                self.flushes += 1
                if len(batches) > self.max_batches_per_flush:
                    self.max_batches_per_flush = len(batches)
                self._wake()
        finally:
            self._task = None

    def _wake(self) -> None:
        done = self._committed
        keep = []
        for target, fut in self._waiters:
            if target <= done:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((target, fut))
        self._waiters = keep

    def _fail(self, exc: BaseException, n_batches: int) -> None:
        self._error = exc
        dropped = n_batches + len(self._pending)
        self._pending = []
        self._committed += dropped  # nothing is in flight any more
        # the owner hears of it through on_error (or the next submit/flush); a log line would say it twice
        log.log(
            logging.DEBUG if self.on_error is not None else logging.ERROR,
            "store writer: flush of %d batch(es) failed: %s: %s",
            dropped,
            type(exc).__name__,
            exc,
        )
        waiters, self._waiters = self._waiters, []
        for _, fut in waiters:
            if not fut.done():
                err = WriterFailedError(exc)
                err.__cause__ = exc
                fut.set_exception(err)
        if self.on_error is not None:
            err = WriterFailedError(exc)
            err.__cause__ = exc
            try:
                self.on_error(err)
            except Exception:
                log.exception("store writer: on_error callback raised")


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

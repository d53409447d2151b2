"""The ingest loop: accept modem connections, parse frames, de-duplicate, batch, store, ack.

One asyncio task per modem connection reads lines and puts parsed readings on a shared queue;
a single writer task drains the queue into batches of `batch_size` (or every `flush_seconds`)
and acknowledges each stored frame back to its connection.

Load shedding: when more than `max_backlog` readings are queued, new frames are NOT
acknowledged (the station keeps them and re-sends later) instead of growing memory without
bound. See docs/architecture.md, "Backpressure".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from tidewater.alerts import AlertEngine
from tidewater.config import Settings, load_settings
from tidewater.parser import FrameError, Reading, parse_frame
from tidewater.storage import Storage

log = logging.getLogger("tidewater.ingest")

DEDUP_WINDOW = 50_000  # (station, time) pairs remembered


@dataclass
class Pending:
    reading: Reading
    writer: asyncio.StreamWriter


class RecentKeys:
    """A bounded set of recently seen (station, time) keys, oldest evicted first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()

    def seen(self, key: tuple[str, str]) -> bool:
        if key in self._keys:
            self._keys.move_to_end(key)
            return True
        self._keys[key] = None
        if len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return False


class Ingest:
    def __init__(self, settings: Settings, storage: Storage, alerts: AlertEngine) -> None:
        self.settings = settings
        self.storage = storage
        self.alerts = alerts
        self.queue: asyncio.Queue[Pending] = asyncio.Queue()
        self.recent = RecentKeys(DEDUP_WINDOW)
        self.stats = {"frames": 0, "stored": 0, "duplicates": 0, "rejected": 0, "shed": 0}

    async def handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        log.info("connection from %s", peer)
        try:
            while line := await reader.readline():
                self.stats["frames"] += 1
                text = line.decode("ascii", errors="replace").strip()
                if not text:
                    continue
                await self.accept_line(text, writer)
        except ConnectionResetError:
            log.warning("connection reset by %s", peer)
        finally:
            writer.close()

    async def accept_line(self, text: str, writer: asyncio.StreamWriter) -> None:
        try:
            reading = parse_frame(text, self.settings.stations)
        except FrameError as exc:
            self.stats["rejected"] += 1
            station = text.split(",")[1] if text.count(",") >= 1 else None
            log.warning("rejected frame from %s: %s", station, exc)
            self.storage.record_rejection(station, exc.reason, text)
            # Rejected frames are acknowledged anyway: re-sending a malformed frame never helps.
            writer.write(f"ACK {station} REJECTED\n".encode())
            return
        key = (reading.station, reading.observed_at.isoformat())
        if self.recent.seen(key):
            self.stats["duplicates"] += 1
            writer.write(f"ACK {reading.station} {key[1]}\n".encode())
            return
        if self.queue.qsize() >= self.settings.max_backlog:
            self.stats["shed"] += 1
            log.error("backlog full (%d); not acknowledging %s %s", self.queue.qsize(), *key)
            return
        await self.queue.put(Pending(reading, writer))

    async def writer_loop(self) -> None:
        batch: list[Pending] = []
        deadline = time.monotonic() + self.settings.flush_seconds
        while True:
            timeout = max(0.0, deadline - time.monotonic())
            try:
                batch.append(await asyncio.wait_for(self.queue.get(), timeout))
            except TimeoutError:
                pass
            if len(batch) >= self.settings.batch_size or time.monotonic() >= deadline:
                if batch:
                    await self.flush(batch)
                    batch = []
                deadline = time.monotonic() + self.settings.flush_seconds

    async def flush(self, batch: list[Pending]) -> None:
        started = time.monotonic()
        readings = [p.reading for p in batch]
        try:
            added = await asyncio.to_thread(self.storage.insert_readings, readings)
        except Exception:
            log.exception("batch of %d failed; frames stay unacknowledged", len(batch))
            return
        self.stats["stored"] += added
        for pending in batch:
            r = pending.reading
            try:
                pending.writer.write(f"ACK {r.station} {r.observed_at.isoformat()}\n".encode())
            except (ConnectionResetError, RuntimeError):
                pass  # the station re-sends; the primary key makes that harmless
        for reading in readings:
            self.alerts.observe(reading)
        log.info(
            "stored %d/%d readings in %.0f ms (queue %d)",
            added, len(batch), (time.monotonic() - started) * 1000, self.queue.qsize(),
        )

    async def silence_loop(self) -> None:
        while True:
            await asyncio.sleep(60)
            self.alerts.check_silence(self.storage.last_seen())
            log.info("stats %s", self.stats)


async def serve(settings: Settings, host: str, port: int) -> None:
    storage = Storage(settings.db_url)
    alerts = AlertEngine(settings)
    ingest = Ingest(settings, storage, alerts)
    server = await asyncio.start_server(ingest.handle_connection, host, port)
    log.info("listening on %s:%d with %d stations", host, port, len(settings.stations))
    async with server:
        await asyncio.gather(server.serve_forever(), ingest.writer_loop(), ingest.silence_loop())


def main() -> None:
    parser = argparse.ArgumentParser(description="Tidewater ingest")
    parser.add_argument("--source", default="tcp://0.0.0.0:7001")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    host, _, port = args.source.removeprefix("tcp://").rpartition(":")
    asyncio.run(serve(load_settings(), host or "0.0.0.0", int(port)))


if __name__ == "__main__":
    main()

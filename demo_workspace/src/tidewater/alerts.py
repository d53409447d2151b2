"""Threshold, rate-of-change and silence alerts, de-duplicated per (station, kind)."""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from datetime import UTC, datetime, timedelta

import httpx

from tidewater.config import Settings
from tidewater.parser import Reading

log = logging.getLogger("tidewater.alerts")

DEDUP = timedelta(minutes=30)
CONSECUTIVE = 3


class AlertEngine:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.recent: dict[str, deque[Reading]] = defaultdict(lambda: deque(maxlen=CONSECUTIVE + 1))
        self.last_sent: dict[tuple[str, str], datetime] = {}

    def observe(self, reading: Reading) -> None:
        station = self.settings.stations.get(reading.station)
        if station is None:
            return
        window = self.recent[reading.station]
        window.append(reading)
        levels = [r.level_m for r in window][-CONSECUTIVE:]
        if len(levels) == CONSECUTIVE and all(v > station.alert_high_m for v in levels):
            self.send(reading.station, "high", f"level {reading.level_m:.3f} m above {station.alert_high_m} m")
        if len(levels) == CONSECUTIVE and all(v < station.alert_low_m for v in levels):
            self.send(reading.station, "low", f"level {reading.level_m:.3f} m below {station.alert_low_m} m")
        if len(window) >= 2:
            a, b = window[-2], window[-1]
            minutes = (b.observed_at - a.observed_at).total_seconds() / 60
            if minutes > 0:
                rate = abs(b.level_m - a.level_m) / minutes
                if rate > station.max_rate_m_per_min:
                    self.send(reading.station, "rate", f"{rate:.3f} m/min over {minutes:.0f} min")

    def check_silence(self, last_seen: dict[str, datetime], now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        limit = timedelta(minutes=self.settings.silence_minutes)
        for station_id in self.settings.stations:
            seen = last_seen.get(station_id)
            if seen is None or now - seen > limit:
                since = "never" if seen is None else seen.isoformat()
                self.send(station_id, "silence", f"no valid frame since {since}")

    def send(self, station: str, kind: str, message: str, now: datetime | None = None) -> bool:
        now = now or datetime.now(UTC)
        key = (station, kind)
        previous = self.last_sent.get(key)
        if previous is not None and now - previous < DEDUP:
            return False
        self.last_sent[key] = now
        log.warning("ALERT %s %s: %s", station, kind, message)
        if self.settings.alert_webhook:
            try:
                httpx.post(
                    self.settings.alert_webhook,
                    json={"station": station, "kind": kind, "message": message, "at": now.isoformat()},
                    timeout=5,
                )
            except httpx.HTTPError as exc:
                log.error("alert webhook failed for %s %s: %s", station, kind, exc)
        return True

"""The readings table. SQLite locally; the same SQL runs on PostgreSQL in production."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from tidewater.parser import Reading

SCHEMA = """
CREATE TABLE IF NOT EXISTS readings (
    station       TEXT    NOT NULL,
    observed_at   TEXT    NOT NULL,
    level_m       REAL    NOT NULL,
    stddev_m      REAL    NOT NULL,
    battery_v     REAL    NOT NULL,
    temperature_c REAL    NOT NULL,
    status        TEXT    NOT NULL,
    received_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (station, observed_at)
);
CREATE INDEX IF NOT EXISTS readings_time ON readings (observed_at);
CREATE TABLE IF NOT EXISTS rejected_frames (
    id          INTEGER PRIMARY KEY,
    station     TEXT,
    reason      TEXT NOT NULL,
    raw         TEXT NOT NULL,
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""


class Storage:
    def __init__(self, url: str) -> None:
        if not url.startswith("sqlite:///"):
            raise SystemExit("only sqlite:/// URLs are supported by this build")
        path = Path(url.removeprefix("sqlite:///"))
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)

    def insert_readings(self, readings: Sequence[Reading]) -> int:
        """Insert a batch; duplicates of (station, observed_at) are ignored. Returns rows added."""
        if not readings:
            return 0
        rows = [
            (r.station, r.observed_at.isoformat(), r.level_m, r.stddev_m, r.battery_v,
             r.temperature_c, r.status)
            for r in readings
        ]
        before = self.db.total_changes
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.executemany(
                "INSERT OR IGNORE INTO readings (station, observed_at, level_m, stddev_m, "
                "battery_v, temperature_c, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self.db.execute("COMMIT")
        except Exception:
            self.db.execute("ROLLBACK")
            raise
        return self.db.total_changes - before

    def record_rejection(self, station: str | None, reason: str, raw: str) -> None:
        self.db.execute(
            "INSERT INTO rejected_frames (station, reason, raw) VALUES (?, ?, ?)",
            (station, reason, raw[:500]),
        )

    def latest(self, station: str, limit: int = 60) -> list[tuple]:
        return self.db.execute(
            "SELECT observed_at, level_m, status FROM readings WHERE station = ? "
            "ORDER BY observed_at DESC LIMIT ?",
            (station, limit),
        ).fetchall()

    def last_seen(self) -> dict[str, datetime]:
        rows = self.db.execute("SELECT station, MAX(observed_at) FROM readings GROUP BY station")
        return {station: datetime.fromisoformat(when) for station, when in rows}

    def rejection_counts(self, since: str) -> Iterable[tuple[str, str, int]]:
        return self.db.execute(
            "SELECT station, reason, COUNT(*) FROM rejected_frames WHERE received_at >= ? "
            "GROUP BY station, reason ORDER BY COUNT(*) DESC",
            (since,),
        )

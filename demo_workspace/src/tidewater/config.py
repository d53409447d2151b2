"""Settings from the environment, and station metadata from config/stations.toml."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Station:
    id: str
    name: str
    latitude: float
    longitude: float
    datum_offset_m: float
    alert_high_m: float
    alert_low_m: float
    max_rate_m_per_min: float
    firmware: str
    legacy_checksum: bool = False
    decimal_comma: bool = False


@dataclass(frozen=True)
class Settings:
    db_url: str = "sqlite:///tidewater.sqlite3"
    stations_path: Path = Path("config/stations.toml")
    batch_size: int = 200
    flush_seconds: float = 5.0
    max_backlog: int = 20_000
    alert_webhook: str | None = None
    silence_minutes: int = 15
    stations: dict[str, Station] = field(default_factory=dict)


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, got {raw!r}") from None


def load_stations(path: Path) -> dict[str, Station]:
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    stations = {}
    for entry in data.get("station", []):
        station = Station(
            id=entry["id"],
            name=entry["name"],
            latitude=float(entry["latitude"]),
            longitude=float(entry["longitude"]),
            datum_offset_m=float(entry.get("datum_offset_m", 0.0)),
            alert_high_m=float(entry["alert_high_m"]),
            alert_low_m=float(entry["alert_low_m"]),
            max_rate_m_per_min=float(entry.get("max_rate_m_per_min", 0.05)),
            firmware=str(entry.get("firmware", "3.2.0")),
            legacy_checksum=bool(entry.get("legacy_checksum", False)),
            decimal_comma=bool(entry.get("decimal_comma", False)),
        )
        if station.id in stations:
            raise SystemExit(f"{path}: station {station.id} is listed twice")
        stations[station.id] = station
    return stations


def load_settings() -> Settings:
    stations_path = Path(os.environ.get("TIDEWATER_STATIONS", "config/stations.toml"))
    return Settings(
        db_url=os.environ.get("TIDEWATER_DB", "sqlite:///tidewater.sqlite3"),
        stations_path=stations_path,
        batch_size=_int("TIDEWATER_BATCH_SIZE", 200),
        flush_seconds=float(os.environ.get("TIDEWATER_FLUSH_SECONDS", "5")),
        max_backlog=_int("TIDEWATER_MAX_BACKLOG", 20_000),
        alert_webhook=os.environ.get("TIDEWATER_ALERT_WEBHOOK") or None,
        silence_minutes=_int("TIDEWATER_SILENCE_MINUTES", 15),
        stations=load_stations(stations_path),
    )

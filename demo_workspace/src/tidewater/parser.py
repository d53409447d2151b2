"""Parse `$TWL` frames and verify their checksum.

A frame looks like::

    $TWL,TW-017,20250314T101500Z,2.431,0.004,11.9,17.2,OK*5C

The checksum is the XOR of every byte between `$` and `*` (exclusive), as two hex digits.
Firmware 3.1 included the `$` in the XOR; stations flagged `legacy_checksum` may use either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from tidewater.config import Station

FRAME_RE = re.compile(r"^\$(?P<body>TWL,[^*]*)\*(?P<checksum>[0-9A-Fa-f]{2})\s*$")
TIME_FORMAT = "%Y%m%dT%H%M%SZ"
STATUSES = {"OK", "WARN", "FAIL"}


class FrameError(ValueError):
    """A frame that cannot be used. `reason` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Reading:
    station: str
    observed_at: datetime
    level_m: float
    stddev_m: float
    battery_v: float
    temperature_c: float
    status: str


def xor_checksum(data: str) -> int:
    value = 0
    for byte in data.encode("ascii", errors="replace"):
        value ^= byte
    return value


def _number(name: str, raw: str, *, decimal_comma: bool) -> float:
    text = raw.strip()
    if decimal_comma and text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")
    try:
        return float(text)
    except ValueError:
        raise FrameError("bad_number", f"{name}={raw!r}") from None


def parse_frame(line: str, stations: dict[str, Station]) -> Reading:
    """Parse one frame or raise FrameError saying why it was rejected."""
    match = FRAME_RE.match(line)
    if not match:
        raise FrameError("malformed", line[:80])
    body = match.group("body")
    expected = int(match.group("checksum"), 16)
    fields = body.split(",")
    if len(fields) < 2:
        raise FrameError("malformed", line[:80])
    station_id = fields[1]
    station = stations.get(station_id)
    if station is None:
        raise FrameError("unknown_station", station_id)

    actual = xor_checksum(body)
    if actual != expected:
        legacy = xor_checksum("$" + body)
        if not (station.legacy_checksum and legacy == expected):
            raise FrameError("checksum", f"{station_id} expected {expected:02X} got {actual:02X}")

    # A decimal comma splits one number into two fields: 17,2 -> "17", "2". Firmware < 3.2
    # does this on modems with a European locale; only the temperature is affected in practice.
    if len(fields) == 9 and station.decimal_comma:
        fields = fields[:6] + [f"{fields[6]},{fields[7]}"] + fields[8:]
    if len(fields) != 8:
        raise FrameError("field_count", f"{station_id} sent {len(fields)} fields, expected 8")

    _, _, when, level, stddev, battery, temperature, status = fields
    try:
        observed_at = datetime.strptime(when, TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise FrameError("bad_time", f"{station_id} time={when!r}") from None
    if status not in STATUSES:
        raise FrameError("bad_status", f"{station_id} status={status!r}")

    comma = station.decimal_comma
    return Reading(
        station=station_id,
        observed_at=observed_at,
        level_m=_number("level", level, decimal_comma=comma) + station.datum_offset_m,
        stddev_m=_number("stddev", stddev, decimal_comma=comma),
        battery_v=_number("battery", battery, decimal_comma=comma),
        temperature_c=_number("temperature", temperature, decimal_comma=comma),
        status=status,
    )

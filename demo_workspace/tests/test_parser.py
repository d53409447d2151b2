from datetime import UTC, datetime

import pytest

from tidewater.config import Station
from tidewater.parser import FrameError, parse_frame, xor_checksum


def station(**overrides):
    values = dict(
        id="TW-001", name="Harbour Mouth", latitude=50.1, longitude=-5.0, datum_offset_m=0.0,
        alert_high_m=4.0, alert_low_m=-0.5, max_rate_m_per_min=0.05, firmware="3.2.1",
    )
    values.update(overrides)
    return Station(**values)


def frame(body: str, *, legacy: bool = False) -> str:
    checksum = xor_checksum(("$" if legacy else "") + body)
    return f"${body}*{checksum:02X}"


STATIONS = {"TW-001": station(), "TW-017": station(id="TW-017", decimal_comma=True, firmware="3.1.4",
                                                  legacy_checksum=True)}


def test_it_parses_a_frame():
    reading = parse_frame(frame("TWL,TW-001,20250314T101500Z,2.431,0.004,11.9,17.2,OK"), STATIONS)
    assert reading.station == "TW-001"
    assert reading.observed_at == datetime(2025, 3, 14, 10, 15, tzinfo=UTC)
    assert reading.level_m == pytest.approx(2.431)
    assert reading.status == "OK"


def test_it_applies_the_datum_offset():
    stations = {"TW-001": station(datum_offset_m=0.25)}
    reading = parse_frame(frame("TWL,TW-001,20250314T101500Z,2.000,0.004,11.9,17.2,OK"), stations)
    assert reading.level_m == pytest.approx(2.25)


def test_it_rejects_a_bad_checksum():
    line = frame("TWL,TW-001,20250314T101500Z,2.431,0.004,11.9,17.2,OK")[:-2] + "00"
    with pytest.raises(FrameError) as info:
        parse_frame(line, STATIONS)
    assert info.value.reason == "checksum"


def test_it_accepts_the_legacy_checksum_only_when_flagged():
    body = "TWL,TW-017,20250314T101500Z,2.431,0.004,11.9,17.2,OK"
    assert parse_frame(frame(body, legacy=True), STATIONS).station == "TW-017"
    stations = {"TW-017": station(id="TW-017")}
    with pytest.raises(FrameError):
        parse_frame(frame(body, legacy=True), stations)


def test_it_repairs_a_decimal_comma_for_flagged_stations():
    reading = parse_frame(frame("TWL,TW-017,20250314T101500Z,2.431,0.004,11.9,17,2,OK"), STATIONS)
    assert reading.temperature_c == pytest.approx(17.2)


def test_it_rejects_a_decimal_comma_from_other_stations():
    with pytest.raises(FrameError) as info:
        parse_frame(frame("TWL,TW-001,20250314T101500Z,2.431,0.004,11.9,17,2,OK"), STATIONS)
    assert info.value.reason == "field_count"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("garbage", "malformed"),
        ("$TWL,TW-999,20250314T101500Z,1,1,1,1,OK*00", "unknown_station"),
    ],
)
def test_it_names_the_reason(line, reason):
    with pytest.raises(FrameError) as info:
        parse_frame(line, STATIONS)
    assert info.value.reason == reason


def test_it_rejects_an_unknown_status():
    with pytest.raises(FrameError) as info:
        parse_frame(frame("TWL,TW-001,20250314T101500Z,2.431,0.004,11.9,17.2,MAYBE"), STATIONS)
    assert info.value.reason == "bad_status"

from datetime import UTC, datetime, timedelta

from tidewater.alerts import AlertEngine
from tidewater.config import Settings, Station
from tidewater.parser import Reading

T0 = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)


def make_engine():
    station = Station(
        id="TW-001", name="Harbour Mouth", latitude=50.1, longitude=-5.0, datum_offset_m=0.0,
        alert_high_m=4.0, alert_low_m=-0.5, max_rate_m_per_min=0.05, firmware="3.2.1",
    )
    engine = AlertEngine(Settings(stations={"TW-001": station}))
    sent = []
    engine.send = lambda station, kind, message, now=None: sent.append((station, kind)) or True
    return engine, sent


def reading(minute, level):
    return Reading("TW-001", T0 + timedelta(minutes=minute), level, 0.004, 12.0, 11.0, "OK")


def test_high_needs_three_consecutive_minutes():
    engine, sent = make_engine()
    engine.observe(reading(0, 4.1))
    engine.observe(reading(1, 4.2))
    assert ("TW-001", "high") not in sent
    engine.observe(reading(2, 4.15))
    assert ("TW-001", "high") in sent


def test_rate_of_change():
    engine, sent = make_engine()
    engine.observe(reading(0, 1.0))
    engine.observe(reading(1, 1.2))
    assert ("TW-001", "rate") in sent


def test_silence():
    engine, sent = make_engine()
    engine.check_silence({"TW-001": T0}, now=T0 + timedelta(minutes=16))
    assert sent == [("TW-001", "silence")]

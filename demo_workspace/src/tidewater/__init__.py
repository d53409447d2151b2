"""Tidewater: tide gauge telemetry ingestion, storage and alerting."""

__version__ = "1.4.2"

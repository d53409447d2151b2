"""A small read-only HTTP API for the dashboard (stdlib server; sits behind the VPN)."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from tidewater.config import load_settings
from tidewater.storage import Storage

log = logging.getLogger("tidewater.api")


def make_handler(storage: Storage, station_ids: set[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            parts = [p for p in url.path.split("/") if p]
            if parts == ["stations"]:
                self._json(200, sorted(station_ids))
            elif len(parts) == 3 and parts[0] == "stations" and parts[2] == "latest":
                station = parts[1]
                if station not in station_ids:
                    self._json(404, {"detail": f"unknown station {station}"})
                    return
                limit = int(parse_qs(url.query).get("limit", ["60"])[0])
                rows = storage.latest(station, min(limit, 1440))
                self._json(200, [{"observed_at": t, "level_m": v, "status": s} for t, v, s in rows])
            elif parts == ["rejections"]:
                since = parse_qs(url.query).get("since", ["1970-01-01"])[0]
                rows = storage.rejection_counts(since)
                self._json(200, [{"station": s, "reason": r, "count": n} for s, r, n in rows])
            else:
                self._json(404, {"detail": "not found"})

        def log_message(self, format: str, *args: object) -> None:
            log.info("%s %s", self.address_string(), format % args)

    return Handler


def main() -> None:
    settings = load_settings()
    storage = Storage(settings.db_url)
    server = ThreadingHTTPServer(("127.0.0.1", 8080), make_handler(storage, set(settings.stations)))
    log.info("API on http://127.0.0.1:8080")
    server.serve_forever()


if __name__ == "__main__":
    main()

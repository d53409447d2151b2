"""Malformed and hostile import files, generated (nothing is checked in).

Each case: a short name, the file's bytes, the name it is uploaded (and saved) under, and
the --format to pass (``auto`` unless the case is about a forced format).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import sqlite3
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    key: str
    data: bytes
    filename: str  # as uploaded; may carry a path
    fmt: str = "auto"

    @property
    def disk_name(self) -> str:
        """A safe local name for the CLI run (the upload name's last part)."""
        return Path(self.filename.replace("\\", "/")).name or f"{self.key}.bin"


def _j(value) -> bytes:
    return json.dumps(value).encode()


def _jl(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _sqlite(statements: list[str]) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "x.db")
        db = sqlite3.connect(path)
        for statement in statements:
            db.execute(statement)
        db.commit()
        db.close()
        return Path(path).read_bytes()


def _zip_bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("session.jsonl", b"\0" * (64 * 2**20))  # 64 MB of zeros, ~64 kB compressed
    return buffer.getvalue()


def _hermes(messages, **extra) -> dict:
    return {
        "id": "20260101_000000_abcdef",
        "source": "cli",
        "started_at": 1767225600,
        "messages": messages,
        **extra,
    }


OK_MESSAGES = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]


def cases() -> list[Case]:
    rng = random.Random(7)
    deep = 100_000
    big = "x" * (20 * 2**20)
    huge_line = (
        b'{"id": "s1", "started_at": 1, "messages": ['
        + b'{"role": "user", "content": "aaaa"},' * 900_000
    )
    sqlite_hermes_corrupt = _sqlite(
        [
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, parent_session_id TEXT)",
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL)",
            "INSERT INTO sessions VALUES ('s1', 'cli', 1, NULL)",
        ]
        + [
            f"INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'user', 'm{i}', {i})"
            for i in range(200)
        ]
    )
    items = [
        # empty and near-empty
        Case("empty-jsonl", b"", "empty.jsonl"),
        Case("empty-json", b"", "empty.json"),
        Case("empty-db", b"", "empty.db"),
        Case("whitespace-only", b"\n\n   \n\t\n", "blank.jsonl"),
        Case("bom-only", b"\xef\xbb\xbf", "bom.json"),
        # broken / truncated JSON
        Case(
            "truncated-json-list",
            b'[{"role": "user", "content": "hi"}, {"role": "assis',
            "cut.json",
        ),
        Case("truncated-jsonl-line", _jl(_hermes(OK_MESSAGES))[:-40], "cut.jsonl"),
        Case("trailing-garbage", _j(OK_MESSAGES) + b" }}}", "trail.json"),
        Case("single-quotes", b"[{'role': 'user', 'content': 'hi'}]", "quotes.json"),
        Case("json-number", b"42", "number.json"),
        Case("json-string", b'"just a string"', "string.json"),
        Case("json-null", b"null", "null.json"),
        Case("json-true", b"true", "true.json"),
        Case("empty-list", b"[]", "nothing.json"),
        Case("list-of-numbers", b"[1, 2, 3]", "numbers.json"),
        Case("list-of-lists", b"[[1], [2]]", "lists.json"),
        # wrong types and fields
        Case("message-without-role", _j([{"content": "no role"}]), "norole.json"),
        Case("unknown-role", _j([{"role": "wizard", "content": "abracadabra"}]), "wizard.json"),
        Case("role-is-number", _j([{"role": 5, "content": "x"}]), "role5.json"),
        Case("role-is-null", _j([{"role": None, "content": "x"}]), "rolenull.json"),
        Case("messages-is-string", _j({"messages": "nope"}), "msgstring.json"),
        Case("messages-is-object", _j({"messages": {"role": "user"}}), "msgobject.json"),
        Case(
            "tool-calls-not-list",
            _j([{"role": "assistant", "content": "", "tool_calls": "call it"}]),
            "calls.json",
        ),
        Case("hermes-messages-null", _jl(_hermes(None)), "hnull.jsonl"),
        Case(
            "hermes-line-is-list",
            _jl(_hermes(OK_MESSAGES))[:0] + b'[1, 2]\n{"id": "x", "messages": 3}\n',
            "hlist.jsonl",
        ),
        Case(
            "hermes-unknown-role",
            _jl(_hermes([{"role": "robot", "content": "beep"}])),
            "hrole.jsonl",
        ),
        Case(
            "hermes-broken-line",
            _jl(_hermes(OK_MESSAGES))[:30] + b"\n",
            "hbroken.jsonl",
            "hermes-jsonl",
        ),
        Case(
            "claude-broken-record",
            b'{"type": "user", "sessionId": "c1", "uuid": "u1", "message": \n',
            "claude.jsonl",
        ),
        Case(
            "claude-wrong-types",
            _jl(
                {
                    "type": "user",
                    "sessionId": "c1",
                    "uuid": "u1",
                    "parentUuid": None,
                    "message": "not an object",
                }
            ),
            "claude2.jsonl",
            "claude-code",
        ),
        Case(
            "codex-broken-record",
            b'{"type": "session_meta", "payload": {"id": "x"\n',
            "codex.jsonl",
        ),
        Case(
            "codex-wrong-types",
            _jl({"type": "response_item", "payload": 17}),
            "codex2.jsonl",
            "codex",
        ),
        # tool pairing
        Case(
            "tool-result-without-call",
            _j(
                [
                    {"role": "user", "content": "q"},
                    {"role": "tool", "tool_call_id": "call_404", "content": "orphan"},
                ]
            ),
            "orphan.json",
        ),
        Case(
            "tool-without-id",
            _j([{"role": "user", "content": "q"}, {"role": "tool", "content": "no id"}]),
            "toolnoid.json",
        ),
        # sizes and shapes
        Case("20mb-single-message", _j([{"role": "user", "content": big}]), "huge.json"),
        Case("deep-nesting-list", b"[" * deep + b"]" * deep, "deep.json"),
        Case(
            "deep-nesting-content",
            b'[{"role": "user", "content": ' + b"[" * deep + b"]" * deep + b"}]",
            "deep2.json",
        ),
        Case(
            "deep-nesting-jsonl",
            b'{"id": "d", "messages": ' + b"[" * deep + b"]" * deep + b"}\n",
            "deep3.jsonl",
        ),
        Case("huge-line-no-newline", huge_line, "hugeline.jsonl"),
        Case("huge-garbage-line", b"a" * (30 * 2**20), "aaaa.jsonl"),
        # encodings and bytes
        Case(
            "invalid-utf8-json", b'[{"role": "user", "content": "caf\xe9 \xff\xfe"}]', "latin1.json"
        ),
        Case(
            "invalid-utf8-jsonl", _jl(_hermes(OK_MESSAGES))[:-3] + b"\xff\xfe\xfd\n", "latin1.jsonl"
        ),
        Case("utf16-json", _j(OK_MESSAGES).decode().encode("utf-16"), "utf16.json"),
        Case("nul-bytes", b"\0" * 4096, "nul.jsonl"),
        Case("nul-inside-json", b'[{"role": "user", "content": "a\0b"}]', "nul2.json"),
        # An escaped NUL in valid JSON is no longer refused: it is kept as "␀" and counted
        # (issue #25; tests/web/test_import_control_chars.py).
        Case("lone-surrogate", b'[{"role": "user", "content": "\\ud800"}]', "surrogate.json"),
        Case("binary-garbage", rng.randbytes(256 * 1024), "garbage.jsonl"),
        Case("binary-garbage-json", rng.randbytes(4096), "garbage.json"),
        # other kinds of file
        Case("gzip-jsonl", gzip.compress(_jl(_hermes(OK_MESSAGES))), "export.jsonl"),
        Case("gzip-json", gzip.compress(_j(OK_MESSAGES)), "export.json"),
        Case("zip-bomb-renamed", _zip_bomb(), "bomb.jsonl"),
        Case("png-renamed", b"\x89PNG\r\n\x1a\n" + rng.randbytes(2000), "image.json"),
        Case("html-page", b"<!doctype html><html><body>not json</body></html>", "page.json"),
        Case("csv-file", b"role,content\nuser,hi\nassistant,hello\n", "table.json"),
        Case("yaml-file", b"- role: user\n  content: hi\n", "conv.jsonl"),
        # SQLite of the wrong kind
        Case(
            "sqlite-other-schema",
            _sqlite(["CREATE TABLE foo (a INTEGER, b TEXT)", "INSERT INTO foo VALUES (1, 'x')"]),
            "other.db",
        ),
        Case(
            "sqlite-sessions-wrong-columns",
            _sqlite(
                [
                    "CREATE TABLE sessions (x INTEGER)",
                    "CREATE TABLE messages (y TEXT)",
                    "INSERT INTO sessions VALUES (1)",
                ]
            ),
            "wrongcols.db",
        ),
        Case(
            "sqlite-truncated",
            sqlite_hermes_corrupt[: len(sqlite_hermes_corrupt) // 2],
            "truncated.db",
        ),
        Case("sqlite-renamed-jsonl", _sqlite(["CREATE TABLE foo (a)"]), "notreally.jsonl"),
        Case("sqlite-forced-on-json", _j(OK_MESSAGES), "forced.json", "hermes-db"),
        Case(
            "jsonl-forced-on-sqlite", _sqlite(["CREATE TABLE foo (a)"]), "forced.db", "hermes-jsonl"
        ),
        # hostile names (the content is bad too, so the upload is refused; the name must not escape)
        Case("traversal-name", b"not json at all", "../../../../tmp/hermes-traversal-probe.jsonl"),
        Case(
            "traversal-name-windows", b"not json at all", "..\\..\\..\\hermes-traversal-probe.json"
        ),
        Case("absolute-name", b"{broken", "/etc/hermes-traversal-probe.jsonl"),
        Case("dotfile-name", b"{broken", ".bashrc"),
        # numbers and types nobody writes (issue #16): a 4xx naming the place, never a 500
        Case(
            "int-over-4300-digits",
            b'[{"role": "user", "content": "hi", "n": ' + b"9" * 5000 + b"}]",
            "bigint.json",
        ),
        Case(
            "int-over-4300-digits-jsonl",
            b'{"id": "s", "started_at": ' + b"1" * 5000 + b', "messages": []}\n',
            "bigint.jsonl",
        ),
        Case(
            "codex-text-is-number",
            _jl(
                {
                    "type": "session_meta",
                    "payload": {"id": "cx1", "timestamp": "2026-01-01T00:00:00Z"},
                },
                {
                    "type": "response_item",
                    "payload": {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": 5}],
                    },
                },
            ),
            "rollout-text5.jsonl",
        ),
        Case(
            "claude-tool-use-without-id",
            _jl(
                {"type": "user", "sessionId": "c1", "message": {"role": "user", "content": "q"}},
                {
                    "type": "assistant",
                    "sessionId": "c1",
                    "message": {
                        "id": "m",
                        "role": "assistant",
                        "content": [{"type": "tool_use", "name": "Read"}],
                    },
                },
            ),
            "claude-noid.jsonl",
        ),
        Case(
            "tool-call-arguments-object",
            _j(
                [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": {"a": 1}},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "r"},
                ]
            ),
            "args.json",
        ),
        Case(
            "tool-call-id-number",
            _j(
                [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": 7,
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                ]
            ),
            "callid.json",
        ),
        Case(
            "content-part-without-type",
            _j([{"role": "user", "content": [{"text": "x"}]}]),
            "part.json",
        ),
        Case("content-is-number", _j([{"role": "user", "content": 12}]), "content12.json"),
        Case(
            "hermes-tool-calls-not-calls",
            _jl(_hermes([{"role": "assistant", "content": "", "tool_calls": "[1, 2]"}])),
            "hcalls.jsonl",
        ),
        Case(
            "lone-surrogate-in-tool-call",
            b'[{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": '
            b'[{"id": "c1", "type": "function", "function": {"name": "\\udfff", "arguments": "{}"}}]}]',
            "surrogate2.json",
        ),
        Case(
            "sqlite-recursive-view",
            _sqlite(
                [
                    "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT)",
                    "CREATE VIEW sessions AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                    "SELECT i AS id, NULL AS parent_session_id, i AS started_at FROM n",
                ]
            ),
            "view.db",
        ),
        Case(
            "sqlite-virtual-messages",
            _sqlite(
                [
                    "CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, started_at REAL)",
                    "CREATE VIRTUAL TABLE messages USING fts5(id, session_id, role, content)",
                    "INSERT INTO sessions VALUES ('s1', NULL, 1)",
                ]
            ),
            "virtual.db",
        ),
        # issue #28: stored size counts metadata; one line too long; errors capped
        Case(
            "metadata-over-message-limit",
            _jl(
                _hermes(
                    [
                        {"role": "user", "content": "hi"},
                        {
                            "role": "assistant",
                            "content": "ok",
                            "display_metadata": big[: 11 * 2**20],
                        },
                    ]
                )
            ),
            "hmeta.jsonl",
        ),
        Case(
            "70mb-single-line",
            b'{"id": "s1", "started_at": 1, "messages": ['
            + b'{"role": "user", "content": "aaaa"},' * (70 * 2**20 // 36),
            "oneline70.jsonl",
        ),
        Case("20000-broken-lines", b"{x\n" * 20_000, "broken20k.jsonl", "hermes-jsonl"),
    ]
    return items


def valid_case() -> Case:
    """A good OpenAI file under a traversal name: imports, and only under its plain name."""
    return Case(
        "valid-control",
        _j(OK_MESSAGES + [{"role": "user", "content": "control"}]),
        "../../../tmp/hermes-valid-control.json",
    )

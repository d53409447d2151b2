"""The terminal fold's line count decodes JSON envelopes with orjson; it must give what the
stdlib json path gave for every input (the oracle below is that path, kept verbatim)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.passes import output_lines
from compaction.resume import _unwrap

_CODE_KEYS = ("exit_code", "returncode", "exit_status", "status_code")
_TEXT_KEYS = ("output", "stdout", "stderr", "result")
_EXIT_JSON = re.compile(r'"exit_code"\s*:\s*(-?\d+)')
_EXIT_TEXT = re.compile(r"(?:exit code|exit status|Exit code)[:\s]+(-?\d+)")


def _code_at_end(content: str) -> str | None:
    end = content[-400:]
    match = _EXIT_JSON.search(end) or _EXIT_TEXT.search(end)
    return match.group(1) if match else None


def _json_object_by_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _output_lines_by_json(content: str) -> tuple[int, str | None]:
    """``output_lines`` as it was with the stdlib decoder (the reference)."""
    code: str | None = None
    stripped = content.lstrip()
    if stripped.startswith("{") and len(stripped) > 64_000:
        match = re.search(r'"(?:exit_code|returncode)"\s*:\s*(-?\d+)', content[-400:])
        return stripped.count("\\n") - stripped.count('\\n"') + 1, (
            match.group(1) if match else None
        )
    if stripped.startswith("{"):
        data = _json_object_by_json(stripped)
        if isinstance(data, Mapping):
            for key in _CODE_KEYS:
                value = data.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    code = str(value)
                    break
            texts = [
                v.rstrip("\n")
                for k in _TEXT_KEYS
                if isinstance(v := data.get(k), str) and v and not v.isspace()
            ]
            if texts or "output" in data or "stdout" in data or "stderr" in data:
                if code is None:
                    code = _code_at_end(content)
                return ("\n".join(texts).count("\n") + 1 if texts else 0), code
    if code is None:
        end = content[-400:]
        match = _EXIT_JSON.search(end) or _EXIT_TEXT.search(end)
        if match:
            code = match.group(1)
    body = content.rstrip("\n")
    return (body.count("\n") + 1 if body and not body.isspace() else 0), code


def _unwrap_by_json(text: str) -> str:
    if not text.lstrip().startswith("{"):
        return text
    if len(text) <= 64_000:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, Mapping):
            inner = [data.get(k) for k in ("output", "stdout", "stderr", "error", "content")]
            return "\n".join(v for v in inner if isinstance(v, str) and v)
    return text.replace("\\n", "\n")


_texts = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\n", "\r", "\t", " ", "\\", '"', "/", "\u2028", "\x00", "\x1f", "é"]),
        st.characters(),
    ),
    max_size=40,
)
_ints = st.one_of(
    st.integers(-3, 300), st.integers(-(2**70), 2**70), st.sampled_from([2**64, -(2**63) - 1])
)
_leaves = st.one_of(
    _texts, _ints, st.booleans(), st.none(), st.floats(allow_nan=True, allow_infinity=True)
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=6,
)
_keys = st.sampled_from([*_CODE_KEYS, *_TEXT_KEYS, "error", "content", "x"]) | _texts
_envelopes = st.dictionaries(_keys, _values, max_size=5)


def _dump(data: Any, ascii_only: bool, compact: bool, indent: int | None) -> str:
    separators = (",", ":") if compact else None
    return json.dumps(data, ensure_ascii=ascii_only, separators=separators, indent=indent)


@st.composite
def _documents(draw: st.DrawFn) -> str:
    data = draw(_envelopes)
    text = _dump(data, draw(st.booleans()), draw(st.booleans()), draw(st.sampled_from([None, 2])))
    mutation = draw(st.sampled_from(["none", "none", "cut", "insert", "pad", "bigint", "dup"]))
    if mutation == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif mutation == "insert":
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(["\\ud800", "\ud800", "NaN", "\\u000a", ",", "\x0c", "\\"]))
        text = text[:at] + piece + text[at:]
    elif mutation == "pad":
        text = (
            draw(st.sampled_from([" ", "\n", "\t", "\u00a0"]))
            + text
            + draw(st.sampled_from(["", " ", "\r\n", "\x0c"]))
        )
    elif mutation == "bigint":
        key = draw(st.sampled_from(_CODE_KEYS))
        number = draw(st.sampled_from(["1" * 25, "-9" * 12]))
        text = '{"output": "a\\nb", "' + key + '": ' + number + "}"
    elif mutation == "dup":
        code = draw(st.sampled_from(["2", "true", "1.5", "null", "1" * 30]))
        text = (
            '{"exit_code": 1, "output": "a\\n", "exit_code": ' + code + ', "output": "x\\ny\\nz"}'
        )
    return text


@settings(max_examples=800, deadline=None)
@given(_documents())
def test_output_lines_agrees_with_the_json_path(text: str) -> None:
    assert output_lines(text) == _output_lines_by_json(text)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries({"output": _texts | _leaves, "exit_code": _ints | _leaves}),
    st.booleans(),
    st.booleans(),
)
def test_the_terminal_envelope_agrees_with_the_json_path(
    data: dict[str, Any], ascii_only: bool, reverse: bool
) -> None:
    items = list(data.items())
    text = json.dumps(dict(reversed(items) if reverse else items), ensure_ascii=ascii_only)
    assert output_lines(text) == _output_lines_by_json(text)


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_unwrap_agrees_with_the_json_path(text: str) -> None:
    assert _unwrap(text) == _unwrap_by_json(text)


def test_envelope_shapes_count_the_output_lines() -> None:
    cases = {
        '{"output": "a\\nb\\nc\\n", "exit_code": 0}': (3, "0"),
        '{"stdout": "a\\nb", "stderr": "boom", "returncode": 2}': (3, "2"),
        '{"output": "caf\\u00e9\\u000aok", "exit_code": 1}': (2, "1"),
        '{"output": "", "exit_code": 0}': (0, "0"),
        '{"output": "a\\\\nb", "exit_code": 0}': (1, "0"),  # a backslash and n: no newline
        '{"output": "x", "exit_code": 99999999999999999999999}': (1, "99999999999999999999999"),
        '{"output": "x", "returncode": 99999999999999999999999}': (1, "99999999999999999999999"),
        '{"output": "\\ud800", "exit_code": 3}': (1, "3"),
        '{"output": "a", "exit_code": NaN}': (1, None),
        '{"output": " \\n\\t", "exit_code": 0}': (0, "0"),
        '{"output": "a\\n\\n\\n", "exit_code": -1}': (1, "-1"),
        '{"output": "a", "exit_code": true}': (1, None),
    }
    for text, expected in cases.items():
        assert output_lines(text) == expected, text
        assert output_lines(text) == _output_lines_by_json(text), text

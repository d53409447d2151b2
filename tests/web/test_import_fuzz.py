"""A fuzz of every import format (issue #39): real-shaped fixtures of our own, mutated the
way a hostile or broken file would be (cycles, self-parents, huge counts, case variants,
wrong types, lone surrogates, one record many times, archives naming one file many times).

Every case must end (hypothesis' examples are few and bounded; no deadline is asserted)
with either a complete import or a refusal in the standard import error type, said without
Python's words, with nothing of a refused session left in the database and the stored
bytes within the amplification limit."""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_web.importers import import_path
from hermes_web.importers.base import ImportProblem
from hermes_web.importers.sizes import json_size
from hermes_web.models import Message, Session
from tests.web.test_import_hostile import _folder, _zip

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
AGENTS = FIXTURES / "agents"
PYTHON_WORDS = (
    "Error:",
    "Error(",
    "Traceback",
    "surrogates not allowed",
    "unhashable",
    "codec",
    "object has no attribute",
    "not subscriptable",
    "/tmp/",
)
RATIO, FLOOR = 4, 256 * 1024  # the fuzz's limit: small enough to matter on small fixtures

# (fixture, format, whether it is JSON lines): one of each import format.
JSON_FIXTURES = [
    (FIXTURES / "hermes_export.jsonl", "hermes-jsonl", True),
    (FIXTURES / "hermes_sessions" / "20260404_110946_8657dc.jsonl", "hermes-jsonl", True),
    (FIXTURES / "hermes_session_export.json", "hermes-jsonl", False),
    (FIXTURES / "openai_list.json", "openai", False),
    (FIXTURES / "openai_agent_log.json", "openai", False),
    (FIXTURES / "claude_code_session.jsonl", "claude-code", True),
    (FIXTURES / "codex_rollout.jsonl", "codex", True),
    (FIXTURES / "codex_rollout_current.jsonl", "codex", True),
    (next((AGENTS / "pi").glob("*.jsonl")), "pi", True),
    (AGENTS / "gemini_cli" / "session-2026-03-02T10-14-5e1c7a20.json", "gemini-cli", False),
    (AGENTS / "gemini_cli" / "session-2026-03-05T08-00-9a2d4c61.jsonl", "gemini-cli", True),
    (
        AGENTS / "copilot_cli" / "3c9d2f14-8e6a-4b7c-a1d5-0f2e4c6b8a90" / "events.jsonl",
        "copilot-cli",
        True,
    ),
    (next((AGENTS / "continue").glob("*.json")), "continue", False),
    (
        AGENTS / "cline" / "tasks" / "1767644899093" / "api_conversation_history.json",
        "cline",
        False,
    ),
    (AGENTS / "openhands" / "trajectory-queue-fix.json", "openhands", False),
    (next((AGENTS / "swe_agent").glob("*.traj")), "swe-agent", False),
]
TEXT_FIXTURES = [
    (next((AGENTS / "cursor").glob("*.md")), "cursor"),
]

# Values put in place of a field: wrong types, huge numbers, lone surrogates, case variants.
HOSTILE = st.sampled_from(
    [
        [],
        ["x"],
        [[1]],
        {},
        {"a": [1]},
        0,
        -1,
        10**30,
        2**63,
        1e308,
        True,
        None,
        "",
        "\ud800",
        "a\udfffb",
        "USER",
        "Assistant",
        "TOOL",
        "x" * 2000,
    ]
)
PARENT_KEYS = ("parentId", "parentUuid", "parent_session_id", "logicalParentUuid", "cause")
ID_KEYS = ("id", "uuid", "session_id", "sessionId")
HOT_KEYS = {
    *PARENT_KEYS,
    *ID_KEYS,
    *("role", "type", "content", "text", "tool_calls", "name", "arguments", "message"),
    *("payload", "messages", "history", "action", "observation", "tool_call_id", "toolCallId"),
}


def _paths(value, prefix=()):
    """Every (path, value) in a JSON document, parents first."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _set(document, path, value):
    if not path:
        return value
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


def _mutate(documents: list, data) -> list:
    """One mutation of one of ``documents`` (a JSONL file's records, or one JSON document)."""
    kind = data.draw(
        st.sampled_from(["replace", "self-parent", "cycle", "repeat", "case", "drop"]),
        label="mutation",
    )
    index = data.draw(st.integers(0, len(documents) - 1), label="record")
    if kind == "repeat":  # one record many times (a resumed or retried write)
        times = data.draw(st.sampled_from([2, 50, 500]), label="times")
        return documents[: index + 1] + [documents[index]] * times + documents[index + 1 :]
    if kind == "cycle" and len(documents) > 2:  # the first record's parent is the last one
        first, last = documents[1], documents[-1]
        if isinstance(first, dict) and isinstance(last, dict):
            for parent, ident in zip(PARENT_KEYS, ("id", "uuid", "id", "uuid", "id"), strict=True):
                if parent in first and ident in last:
                    first[parent] = last[ident]
        return documents
    spots = list(_paths(documents[index]))
    # Half the time a field importers key on (a role, a type, an id, a parent, content).
    hot = [spot for spot in spots if spot[0] and spot[0][-1] in HOT_KEYS]
    if hot and data.draw(st.booleans(), label="hot"):
        spots = hot
    path, value = spots[data.draw(st.integers(0, len(spots) - 1), label="field")]
    if kind == "self-parent" and isinstance(value, dict):
        ident = next((value[k] for k in ID_KEYS if k in value), "self")
        for parent in PARENT_KEYS:
            value[parent] = ident
        return documents
    if kind == "case" and isinstance(value, str):
        new = value.upper() if value != value.upper() else value.lower()
    elif kind == "drop" and path:
        parent = documents[index]
        for step in path[:-1]:
            parent = parent[step]
        parent.pop(path[-1]) if isinstance(parent, dict | list) else None
        return documents
    else:
        new = data.draw(HOSTILE, label="value")
    documents[index] = _set(documents[index], path, new)
    return documents


def _dump(documents: list, lines: bool) -> bytes:
    if lines:
        return b"".join(json.dumps(d, ensure_ascii=True).encode() + b"\n" for d in documents)
    return json.dumps(documents[0], ensure_ascii=True).encode()


def _stored_chars(sessions) -> int:
    total = 0
    for m in Message.objects.filter(session__in=sessions).iterator():
        total += json_size(m.content) + json_size(m.tool_calls) + json_size(m.reasoning)
        total += len(m.tool_call_id) + len(m.tool_name) + json_size(m.extra)
    return total


def _check(path: Path, owner, fmt: str = "auto", read: int | None = None) -> None:
    """The invariants of one import: a complete import or plain refusals, nothing of a
    refused session stored, stored bytes within the limit."""
    before = set(Session.objects.filter(owner=owner).values_list("pk", flat=True))
    messages_before = Message.objects.count()
    report = import_path(path, owner=owner, fmt=fmt)
    for problem in [*report.errors, *report.duplicates]:
        assert isinstance(problem, ImportProblem)
        for word in PYTHON_WORDS:
            assert word not in str(problem), str(problem)
    stored = {s.pk for s in report.sessions}
    after = set(Session.objects.filter(owner=owner).values_list("pk", flat=True))
    assert after - before == stored, "a refused session left a row behind"
    new_messages = Message.objects.count() - messages_before
    assert new_messages == Message.objects.filter(session__in=stored).count()
    read = read or path.stat().st_size
    assert _stored_chars(stored) <= max(RATIO * read, FLOOR)
    Session.objects.filter(owner=owner).delete()  # the next example starts clean


@pytest.fixture
def fuzz_limits(settings):
    settings.HERMES_IMPORT_AMPLIFICATION = RATIO
    settings.HERMES_IMPORT_AMPLIFICATION_FLOOR = FLOOR


FUZZ = settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize(
    ("fixture", "fmt", "lines"), JSON_FIXTURES, ids=[f"{f[1]}:{f[0].name}" for f in JSON_FIXTURES]
)
@FUZZ
@given(data=st.data())
def test_every_mutation_of_a_format_ends_clean(
    alice, tmp_path, fuzz_limits, fixture, fmt, lines, data
):
    text = fixture.read_text(encoding="utf-8")
    documents = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if lines
        else [json.loads(text)]
    )
    mutated = _mutate(documents, data)
    path = tmp_path / fixture.name
    path.write_bytes(_dump(mutated, lines))
    # format given (a mutation may make auto detection fail, which is a refusal too)
    _check(path, alice, fmt)


@pytest.mark.parametrize(("fixture", "fmt"), TEXT_FIXTURES)
@FUZZ
@given(data=st.data())
def test_text_formats_with_hostile_lines_end_clean(
    alice, tmp_path, fuzz_limits, fixture, fmt, data
):
    lines = fixture.read_text(encoding="utf-8").splitlines()
    at = data.draw(st.integers(0, len(lines)), label="at")
    extra = data.draw(
        st.sampled_from(["_**User**_", "_**Assistant (x)**_", "---", "\ud800", "`" * 500])
    )
    times = data.draw(st.sampled_from([1, 100]))
    lines[at:at] = [extra] * times
    path = tmp_path / fixture.name
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    _check(path, alice, fmt)


@FUZZ
@given(copies=st.sampled_from([2, 30]), same_name=st.booleans())
def test_an_archive_naming_one_file_many_times_ends_clean(
    alice, tmp_path, fuzz_limits, copies, same_name
):
    data = (FIXTURES / "claude_code_session.jsonl").read_bytes()
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name: the point here
        for n in range(copies):
            archive.writestr("s.jsonl" if same_name else f"d{n}/s.jsonl", data)
    path = tmp_path / "many.zip"
    path.write_bytes(buffer.getvalue())
    _check(path, alice)


@FUZZ
@given(stubs=st.sampled_from([1, 5, 40]), agents=st.sampled_from([0, 3, 12]))
def test_a_folder_archive_whose_stubs_name_one_file_ends_within_the_limit(
    alice, tmp_path_factory, fuzz_limits, stubs, agents
):
    root = _folder(tmp_path_factory.mktemp("p"), stubs, agents, stubs, size=64 * 1024)
    path = tmp_path_factory.mktemp("z") / "folder.zip"
    path.write_bytes(_zip(root))
    _check(path, alice, read=sum(p.stat().st_size for p in root.rglob("*") if p.is_file()))

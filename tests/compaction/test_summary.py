import re
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.summary import (
    END_MARKER,
    PREFIX_OPENING,
    SECTIONS,
    SUMMARY_PREFIX,
    SummaryFacts,
    build_prompt,
    deterministic_summary,
    is_summary_text,
    split_summary,
    summary_template,
    wrap_summary,
)

from .builders import assistant, call, result, user

DAY = date(2026, 3, 14)


def headings(text):
    return re.findall(r"^## (.+)$", text, re.MULTILINE)


def test_template_sections_in_seed_order():
    assert SECTIONS == (
        "Active Task",
        "Goal",
        "Constraints & Preferences",
        "Completed Actions",
        "Active State",
        "Blocked",
        "Key Decisions",
        "Resolved Questions",
        "Pending User Asks",
        "Relevant Files",
        "Remaining Work",
    )
    assert headings(summary_template(DAY)) == list(SECTIONS)
    assert "N. VERB target — outcome [tool: name]" in summary_template(DAY)


def test_wrapped_summary_has_prefix_body_and_end_marker():
    content = wrap_summary("## Active Task\nx")
    assert content.startswith("[CONTEXT COMPACTION — REFERENCE ONLY]")
    assert content == SUMMARY_PREFIX + "\n## Active Task\nx\n\n" + END_MARKER
    assert (
        END_MARKER
        == "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
    )
    assert "AFTER this summary" in SUMMARY_PREFIX
    assert "\n" not in SUMMARY_PREFIX


def test_split_recognizes_current_legacy_and_merged_forms():
    assert split_summary(wrap_summary("body")) == ("body", "")
    assert split_summary("[CONTEXT SUMMARY]: old body") == ("old body", "")
    assert split_summary(f"{PREFIX_OPENING} older wording:\nbody2\n\n{END_MARKER}\n\nlive ask") == (
        "body2",
        "live ask",
    )
    merged = (
        "[PRIOR CONTEXT — for reference only; not a new message]\noriginal\n\n"
        "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]\n\n" + wrap_summary("b3")
    )
    assert split_summary(merged) == ("b3", "original")
    assert split_summary("plain text") == (None, "plain text")
    assert is_summary_text("[CONTEXT SUMMARY]: x")
    assert not is_summary_text("hello [CONTEXT SUMMARY]:")


def test_first_prompt_has_turns_template_date_and_no_update_wording():
    prompt = build_prompt("[USER]: hi", now=DAY, budget_tokens=3_000)
    assert "TURNS TO SUMMARIZE:\n[USER]: hi" in prompt
    assert "PREVIOUS SUMMARY" not in prompt
    assert headings(prompt) == list(SECTIONS)
    assert "TEMPORAL ANCHORING: The current date is 2026-03-14" in prompt
    assert "past-tense" in prompt
    assert "Target ~3000 tokens" in prompt
    assert "FOCUS TOPIC" not in prompt


def test_iterative_prompt_updates_the_previous_summary_and_focus_comes_last():
    prompt = build_prompt(
        "[USER]: new", now=DAY, previous_summary="## Goal\nold goal", focus="the parser bug"
    )
    assert "PREVIOUS SUMMARY:\n## Goal\nold goal" in prompt
    assert "NEW TURNS TO INCORPORATE:\n[USER]: new" in prompt
    assert prompt.index("PREVIOUS SUMMARY") < prompt.index("NEW TURNS")
    assert prompt.rstrip().split("\n\n")[-1].startswith('FOCUS TOPIC: "the parser bug"')


def facts(middle, **kw):
    base = {
        "fold_lines": {},
        "first_user_text": "build the parser",
        "previous_summary": None,
        "focus": None,
        "now": DAY,
    }
    base.update(kw)
    return SummaryFacts(middle=middle, **base)


def test_deterministic_summary_fills_the_template_from_data():
    middle = [
        user("Please never push to main. Fix src/app/parser.py please?"),
        assistant(
            None,
            call("c1", "read_file", path="src/app/parser.py"),
            call("c2", "terminal", command="pytest -q"),
        ),
        result("c1", "def parse(): ..."),
        result("c2", '{"output": "E   IndexError: list index out of range", "exit_code": 1}'),
        assistant("I decided to guard the empty case because tokens may be empty."),
        user("Now also update docs/usage.md — the exact wording matters"),
    ]
    body = deterministic_summary(
        facts(middle, fold_lines={3: "[terminal] ran `pytest -q` -> exit 1, 1 lines output"})
    )
    assert headings(body) == list(SECTIONS)
    sections = dict(
        zip(headings(body), re.split(r"^## .+$", body, flags=re.MULTILINE)[1:], strict=True)
    )
    assert (
        sections["Active Task"].strip()
        == "Now also update docs/usage.md — the exact wording matters"
    )
    assert "build the parser" in sections["Goal"]
    assert "never push to main" in sections["Constraints & Preferences"]
    assert "1. READ src/app/parser.py — def parse(): ... (on 2026-03-14) [tool: read_file]" in body
    assert (
        "2. RAN `pytest -q` — [terminal] ran `pytest -q` -> exit 1, 1 lines output "
        "(on 2026-03-14) [tool: terminal]"
    ) in body
    assert "IndexError: list index out of range" in sections["Blocked"]
    assert "guard the empty case" in sections["Key Decisions"]
    assert "src/app/parser.py" in sections["Relevant Files"]
    assert "docs/usage.md" in sections["Relevant Files"]
    assert "update docs/usage.md" in sections["Pending User Asks"]
    assert "Fix src/app/parser.py" in sections["Resolved Questions"]
    assert "2026-03-14" in sections["Active State"]


def test_deterministic_summary_carries_the_previous_summary_forward():
    previous = deterministic_summary(
        facts(
            [user("first ask"), assistant(None, call("a", "patch", path="x.py")), result("a", "ok")]
        )
    )
    body = deterministic_summary(
        facts(
            [
                user("second ask"),
                assistant(None, call("b", "terminal", command="make")),
                result("b", "ok"),
            ],
            previous_summary=previous,
        )
    )
    assert "1. PATCHED x.py" in body
    assert "2. RAN `make`" in body
    assert "x.py" in body.split("## Relevant Files")[1]
    assert body.split("## Active Task\n")[1].startswith("second ask")


def test_deterministic_summary_keeps_unstructured_previous_text():
    body = deterministic_summary(
        facts([user("go")], previous_summary="LEGACY NOTES: the DB is on port 5433")
    )
    assert "LEGACY NOTES: the DB is on port 5433" in body


def test_deterministic_summary_is_bounded():
    middle = []
    for i in range(3_000):
        middle.append(assistant(None, call(f"c{i}", "terminal", command=f"cmd {i} " + "x" * 200)))
        middle.append(result(f"c{i}", "Error: boom " + "y" * 5_000))
        middle.append(user("u" * 3_000 + "?"))
    body = deterministic_summary(facts(middle, max_chars=12_000))
    assert len(body) <= 12_000
    assert "earlier actions omitted" in body
    assert "cmd 2999" in body


def test_deterministic_summary_counts_every_action_when_its_lists_fill_early():
    # Every list fills within the newest messages, so the walk ends early and only counts
    # the older calls: the numbering and the omitted count must still cover all 3,000.
    middle = []
    for i in range(3_000):
        middle.append(user(f"You must keep src/m{i}/a.py small, ok {i}?"))
        middle.append(
            assistant(
                f"I decided to split src/m{i}/b.py because it grew.",
                call(f"c{i}", "patch", path=f"src/m{i}/c.py"),
                call(f"t{i}", "terminal", command=f"make {i}"),
            )
        )
        middle.append(result(f"c{i}", "ok"))
        middle.append(result(f"t{i}", "ok"))
    body = deterministic_summary(facts(middle, max_chars=12_000))
    actions = body.split("## Completed Actions\n")[1].split("\n\n## ")[0].splitlines()
    omitted = int(re.match(r"\((\d+) earlier actions omitted\)$", actions[0]).group(1))
    numbered = actions[1:]
    assert omitted + len(numbered) == 6_000
    assert numbered[-1].startswith("6000. RAN `make 2999`")
    files = body.split("## Relevant Files\n")[1].split("\n\n## ")[0]
    assert "src/m2999/c.py" in files
    assert "src/m0/" not in files
    assert "m2999" in body.split("## Key Decisions\n")[1].split("\n\n## ")[0]


def section(body: str, name: str) -> str:
    return body.split(f"## {name}\n")[1].split("\n\n## ")[0]


def filler_naming_one_file(n: int, *, with_terminal: bool) -> list:
    """``n`` exchanges that fill every summary list except the files (all name src/a.py)."""
    out = []
    for i in range(n):
        calls = [call(f"c{i}", "patch", path="src/a.py")]
        if with_terminal:
            calls.append(call(f"t{i}", "terminal", command=f"make {i}"))
        out.append(user(f"You must keep it small, ok {i}?"))
        out.append(assistant("I decided to patch src/a.py because it grew.", *calls))
        out += [result(c["id"], "ok") for c in calls]
    return out


def test_files_named_only_early_are_found_after_the_other_lists_fill():
    # Every list but the files fills within the newest messages; the files are walked on
    # until the newest 20 distinct ones are known (the section shows the newest 12).
    middle = [user("Please read docs/f0.md first")]
    for i in range(1, 25):
        middle.append(
            assistant(f"Next, lib/f{i}.py.", call(f"r{i}", "read_file", path=f"x/f{i}.cfg"))
        )
        middle.append(result(f"r{i}", "ok"))
    middle += filler_naming_one_file(2_000, with_terminal=True)
    body = deterministic_summary(facts(middle, max_chars=12_000))
    named = re.findall(r"\S+/f\d+\.\w+|src/a\.py", section(body, "Relevant Files"))
    # Walked newest first, a message's text before its calls; listed oldest first.
    newest = [name for i in range(24, 0, -1) for name in (f"lib/f{i}.py", f"x/f{i}.cfg")]
    assert named == [*newest[:19][::-1], "src/a.py"][-12:]
    actions = section(body, "Completed Actions").splitlines()
    omitted = int(re.match(r"\((\d+) earlier actions omitted\)$", actions[0]).group(1))
    assert omitted + len(actions) - 1 == 24 + 4_000


def test_files_are_walked_to_the_start_when_fewer_than_the_list_holds():
    middle = [user("The config is in etc/first.toml")]
    middle.append(assistant("Reading lib/second.py", call("r0", "read_file", path="x/third.cfg")))
    middle.append(result("r0", "ok"))
    middle += filler_naming_one_file(2_000, with_terminal=False)
    body = deterministic_summary(facts(middle, max_chars=12_000))
    files = section(body, "Relevant Files")
    named = re.findall(r"etc/first\.toml|lib/second\.py|x/third\.cfg|src/a\.py", files)
    assert named == ["etc/first.toml", "x/third.cfg", "lib/second.py", "src/a.py"]


def _newest_paths_walking_back(middle, keep):
    """The plain definition: read newest first (a message's text before its calls, the last
    call first), keep the first ``keep`` distinct paths, list them oldest first."""
    from compaction.messages import content_text, parse_arguments, tool_calls
    from compaction.summary import _PATH_KEYS, _PATH_RE

    seen = {}
    for message in reversed(middle):
        text = content_text(message.get("content"), images=False)
        if message["role"] == "user" or (message["role"] == "assistant" and text.strip()):
            for path in reversed(_PATH_RE.findall(text[:4_000])):
                seen.setdefault(path)
        if message["role"] == "assistant":
            for c in reversed(tool_calls(message)):
                for key, value in parse_arguments(c).items():
                    if key in _PATH_KEYS and value and isinstance(value, str):
                        seen.setdefault(value)
    return list(seen)[:keep][::-1]


path_names = st.sampled_from([f"src/m{i}/f{i}.py" for i in range(30)])


@st.composite
def messages_naming_files(draw):
    out = []
    for i in range(draw(st.integers(0, 60))):
        texts = " and ".join(draw(st.lists(path_names, max_size=3)))
        if draw(st.booleans()):
            out.append(user(f"look at {texts}"))
            continue
        calls = [
            call(f"c{i}_{k}", "patch", **{key: draw(path_names) for key in keys})
            for k, keys in enumerate(
                draw(
                    st.lists(
                        st.sampled_from([("path",), ("path", "workdir"), ("dir",)]), max_size=3
                    )
                )
            )
        ]
        out.append(assistant(draw(st.sampled_from(["", "  ", f"edited {texts}"])), *calls))
        out += [result(c["id"], "ok") for c in calls]
    return out


@given(middle=messages_naming_files(), cut=st.integers(0, 200))
@settings(max_examples=150, deadline=None)
def test_gathered_files_are_the_newest_distinct_paths_in_order(middle, cut):
    from compaction.summary import MiddleGathered, gather_middle

    gathered = MiddleGathered()
    cut = min(cut, len(middle))
    gather_middle(middle, 0, cut, None, gathered)  # in two ranges, as the engine's blocks
    gather_middle(middle, cut, len(middle), None, gathered)
    for keep in (1, 5, 20):
        assert gathered.newest(keep) == _newest_paths_walking_back(middle, keep)
    assert gathered.call_count == sum(len(m.get("tool_calls") or []) for m in middle)
    replies = [i for i, m in enumerate(middle) if m["role"] == "assistant" and m["content"].strip()]
    assert gathered.last_reply_pos == (replies[-1] if replies else -1)

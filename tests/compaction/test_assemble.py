import pytest

from compaction.assemble import assemble, choose_summary_role
from compaction.summary import COMPACTION_NOTE, END_MARKER, wrap_summary

from .builders import assistant, call, result, system, user

S = "[CONTEXT COMPACTION — REFERENCE ONLY] x:\nbody"


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        ([system(), user("u")], [user("latest")], ("assistant", None, False)),  # head ends user
        ([system(), user("u"), assistant("a")], [user("latest")], ("user", 0, False)),
        ([system(), user("u"), assistant("a")], [assistant("x"), user("l")], ("user", None, False)),
        ([system()], [assistant("a"), user("l")], ("user", None, True)),  # forced user-leading
        ([system()], [user("l")], ("user", 0, True)),  # forced + collision → merge
        ([], [user("l")], ("user", 0, True)),
        ([system(), user("u")], [assistant("a")], ("assistant", 0, False)),  # double collision
        (
            [system(), user("u"), assistant(None, call("c")), result("c")],
            [user("l")],
            ("assistant", None, False),
        ),  # exempt rows skipped
    ],
)
def test_summary_role_choice(head, tail, expected):
    assert choose_summary_role(head, tail) == expected


def test_standalone_summary_between_head_and_tail_with_note_once():
    head = [system("sys"), user("u"), assistant("a")]
    tail = [assistant("earlier reply"), user("latest"), assistant("reply")]
    a = assemble(head, range(3), S, tail, range(10, 13))
    assert a.messages[0]["content"] == f"sys\n\n{COMPACTION_NOTE}"
    assert a.messages[3] == {"role": "user", "content": f"{S}\n\n{END_MARKER}"}
    assert a.summary_index == 3
    assert a.sources == [0, 1, 2, None, 10, 11, 12]
    assert not a.merged
    again = assemble(a.messages[:3], range(3), S, tail, range(10, 13))
    assert again.messages[0]["content"].count(COMPACTION_NOTE) == 1
    assert head[0]["content"] == "sys"


def test_forced_merge_puts_the_live_request_after_the_marker():
    a = assemble([system()], [0], S, [user("do it")], [5])
    assert a.merged
    assert a.messages[1]["content"] == f"{S}\n\n{END_MARKER}\n\ndo it"
    assert a.summary_index == 1


def test_collision_with_the_latest_user_message_keeps_it_after_the_marker():
    a = assemble([system(), user("u"), assistant("a")], [0, 1, 2], S, [user("latest")], [9])
    assert a.messages[3] == {"role": "user", "content": f"{S}\n\n{END_MARKER}\n\nlatest"}


def test_double_collision_merges_into_the_first_tail_row():
    a = assemble([system(), user("u")], [0, 1], S, [assistant("reply")], [7])
    content = a.messages[2]["content"]
    assert content.startswith("[PRIOR CONTEXT — for reference only; not a new message]\nreply")
    assert content.endswith(f"{S}\n\n{END_MARKER}")
    assert a.messages[2]["role"] == "assistant"


def test_earlier_summaries_in_head_and_tail_are_not_duplicated():
    old = {"role": "user", "content": wrap_summary("old body")}
    carrier = {"role": "user", "content": wrap_summary("old body") + "\n\nlive question"}
    a = assemble([system(), old], [0, 1], S, [carrier, assistant("x")], [4, 5])
    texts = [m["content"] for m in a.messages]
    assert sum("old body" in t for t in texts) == 0
    assert any(t.endswith(f"{END_MARKER}\n\nlive question") for t in texts)

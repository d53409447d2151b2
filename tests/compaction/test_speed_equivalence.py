"""The fast paths of the speed work agree with the plain regex code they replaced."""

from __future__ import annotations

import copy
import random
import re

from compaction import resume

_NAME_END = re.compile(r"(?:Error|Exception)\b")
# ``\Z`` (not ``$``): the word must end right at the suffix; ``$`` also matches before a
# final newline, which once made "Foo\nError" a name.
_WORD_TAIL = re.compile(r"[A-Za-z0-9_]+\Z")


def _exception_names_by_regex(text: str) -> list[str]:
    # The plain regex version of what the fast path computes.
    names: dict[str, None] = {}
    for count, match in enumerate(_NAME_END.finditer(text)):
        if count >= 8:
            break
        start = match.start()
        head = _WORD_TAIL.search(text, max(0, start - 60), start)
        name = text[head.start() if head else start : match.end()]
        if name[:1].isupper() and len(name) > len(match.group(0)):
            names[name] = None
    return list(names)


_PIECES = (
    "ValueError",
    "Error",
    "Errors",
    "KeyError:",
    "ErrorException",
    "RuntimeException",
    "Exception_",
    "ExceptionGroup",
    "errorError",
    "é",
    "Erroré",
    "x" * 70 + "Error",
    " ",
    "\n",
    "_",
    "Traceback",
    "1Error",
    "OSError\n",
)


def test_a_suffix_starting_a_line_is_no_name() -> None:
    assert resume._exception_names("raise Foo\nError: x\nValueError: y") == ["ValueError"]
    assert resume._exception_names("KeyError KeyError OSError") == ["KeyError", "OSError"]


def test_exception_names_match_the_regex_version() -> None:
    rng = random.Random(13)
    for _ in range(3_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 25)))
        assert resume._exception_names(text) == _exception_names_by_regex(text), text


def test_copy_message_equals_deepcopy_and_shares_nothing_mutable() -> None:
    from compaction import generate_conversation
    from compaction.assemble import copy_message

    class Tagged(dict):
        pass

    odd = {
        "role": "tool",
        "content": [{"type": "text", "text": "x"}, ("a", 1)],
        "meta": Tagged(k=[1, 2]),
        "n": 1.5,
        "ok": True,
        "none": None,
    }
    for message in [*generate_conversation(200, seed=5), odd]:
        copied = copy_message(message)
        assert copied == copy.deepcopy(message)
        stack = [(message, copied)]
        while stack:
            a, b = stack.pop()
            if isinstance(a, dict | list):
                assert a is not b
                pairs = (
                    zip(a.values(), b.values(), strict=True)
                    if isinstance(a, dict)
                    else zip(a, b, strict=True)
                )
                stack.extend(pairs)
    assert type(copy_message(odd)["meta"]) is Tagged

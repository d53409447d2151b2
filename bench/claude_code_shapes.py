"""Claude Code sessions of any length, in the shape real ones have, converted by our importer.

Real Claude Code transcripts are tool-heavy: each request is followed by a run of ``Read``,
``Bash``, ``Edit``, ``Grep``, ``Glob``, ``Write`` and ``TodoWrite`` calls, one content block per
JSONL record sharing ``message.id`` (thinking, text, tool_use), each result in its own ``user``
record with a ``toolUseResult``. ``Read`` returns ``cat -n`` listings of 1–25 KB (``   12→…``),
``Bash`` returns test runs, tracebacks with ``Exit code 1`` and ``git`` output, ``Edit`` quotes a
snippet of the edited file. Nothing here is copied from a real transcript: the text is
generated from these shapes, deterministically for a seed.

``claude_code_session(n)`` writes the JSONL, parses it with ``hermes_web.importers.formats.claude_code``
(the path a user's upload takes) and returns the engine's OpenAI-format messages of the active
rows, which is what a compaction of the imported session reads.
"""

from __future__ import annotations

import io
import json
import os
import random
from collections.abc import Iterator
from typing import Any

ROOT_DIR = "/home/dev/shop"
_FILES = [
    "src/shop/cart.py",
    "src/shop/checkout.py",
    "src/shop/models.py",
    "src/shop/api/views.py",
    "src/shop/api/serializers.py",
    "src/shop/payments/stripe.py",
    "tests/test_cart.py",
    "tests/test_checkout.py",
    "tests/api/test_views.py",
    "web/components/CartList.tsx",
    "web/pages/checkout.tsx",
    "pyproject.toml",
    "README.md",
]
_ASKS = [
    "The checkout total is wrong when a coupon and free shipping apply together. Find out why "
    "and fix it; keep the public API of cart.py unchanged.",
    "Run the test suite and fix whatever fails. Do not touch the migrations.",
    "Add a --dry-run flag to the refund command and document it in README.md.",
    "Why does CartList re-render on every keystroke? Make it stop.",
    "Rename Basket to Cart everywhere, including the tests.",
    "The API returns 500 for an empty cart. It should return 400 with a message.",
]
_WORDS = [
    "cart",
    "total",
    "coupon",
    "shipping",
    "price",
    "line",
    "item",
    "order",
    "user",
    "session",
    "token",
    "value",
]


def _code_line(rng: random.Random, number: int) -> str:
    name = rng.choice(["total", "apply_coupon", "shipping_for", "line_items", "checkout"])
    kind = number % 6
    if kind == 0:
        return f"def {name}_{number}(cart: Cart, *, strict: bool = False) -> Decimal:"
    if kind == 1:
        return f'    """Return the {rng.choice(_WORDS)} of the cart after discounts."""'
    if kind == 2:
        return f"    subtotal = sum(item.price * item.quantity for item in cart.items)  # {number}"
    if kind == 3:
        return "    if strict and not cart.items:"
    if kind == 4:
        return f"        raise CheckoutError('empty cart in {name}_{number}')"
    return "    return subtotal.quantize(CENTS)"


def _listing(rng: random.Random, start: int, lines: int) -> str:
    """A ``cat -n`` listing as Claude Code's Read returns it."""
    return "\n".join(f"{n:>6}→{_code_line(rng, n)}" for n in range(start, start + lines))


def _tool(rng: random.Random, turn: int) -> tuple[str, dict[str, Any], str, bool, dict[str, Any]]:
    """One call: name, input, result text, is_error, toolUseResult."""
    path = f"{ROOT_DIR}/{rng.choice(_FILES)}"
    tool = rng.choices(
        ["Read", "Bash", "Edit", "Grep", "Glob", "Write", "TodoWrite"],
        weights=[34, 30, 16, 9, 4, 3, 4],
    )[0]
    if tool == "Read":
        start = rng.choice([1, 1, 1, 80, 240])
        lines = int(20 * 10 ** (rng.random() * 1.4))  # 20–500 lines, 1–25 KB
        text = _listing(rng, start, lines)
        return tool, {"file_path": path}, text, False, {"type": "text", "file": {"filePath": path}}
    if tool == "Bash":
        kind = rng.random()
        if kind < 0.25:
            failing = rng.randint(1, 4)
            text = (
                "Exit code 1\n"
                + "".join(
                    f"FAILED tests/test_cart.py::test_total_{i} - AssertionError: "
                    f"assert Decimal('{rng.randint(5, 90)}.00') == Decimal('42.00')\n"
                    for i in range(failing)
                )
                + "Traceback (most recent call last):\n"
                f'  File "{ROOT_DIR}/src/shop/checkout.py", line {rng.randint(20, 300)}, '
                "in total\n    return subtotal - coupon.amount\n"
                "TypeError: unsupported operand type(s) for -: 'Decimal' and 'NoneType'\n"
                + _listing(rng, 1, rng.randint(5, 60))
                + f"\n{failing} failed, {rng.randint(20, 200)} passed in 3.{rng.randint(10, 99)}s"
            )
            command = "python -m pytest -q tests/"
            return tool, {"command": command, "description": "Run tests"}, text, True, {}
        command = rng.choice(
            [
                "git status --short",
                "git diff --stat",
                "ls -la src/shop",
                "ruff check src",
                "python -m pytest -q tests/test_cart.py",
                "grep -rn 'coupon' src/ | head -50",
            ]
        )
        text = "\n".join(
            f"src/shop/{rng.choice(_WORDS)}_{i}.py:{rng.randint(1, 400)}: "
            + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            for i in range(rng.randint(2, 80))
        )
        result = {"stdout": "…", "stderr": "", "interrupted": False}
        return tool, {"command": command, "description": "Inspect"}, text, False, result
    if tool == "Edit":
        old = _code_line(rng, 2)
        new = old.replace("sum(", "sum_prices(")
        text = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            "snippet of the edited file:\n" + _listing(rng, rng.randint(1, 300), rng.randint(8, 14))
        )
        args = {"file_path": path, "old_string": old, "new_string": new}
        return tool, args, text, False, {"filePath": path, "oldString": old}
    if tool == "Grep":
        hits = rng.sample(_FILES, rng.randint(1, 8))
        text = f"Found {len(hits)} files\n" + "\n".join(f"{ROOT_DIR}/{h}" for h in hits)
        return tool, {"pattern": "coupon", "output_mode": "files_with_matches"}, text, False, {}
    if tool == "Glob":
        text = "\n".join(f"{ROOT_DIR}/{h}" for h in rng.sample(_FILES, 6))
        return tool, {"pattern": "**/*.py"}, text, False, {}
    if tool == "Write":
        content = _listing(rng, 1, rng.randint(10, 80)).replace("→", " ")
        text = f"File created successfully at: {path}"
        return tool, {"file_path": path, "content": content}, text, False, {"type": "create"}
    todos = [
        {"content": f"Fix {rng.choice(_WORDS)} {i}", "status": "pending", "activeForm": "Fixing"}
        for i in range(rng.randint(2, 6))
    ]
    text = (
        "Todos have been modified successfully. Ensure that you continue to use the todo list "
        "to track your progress. Please proceed with the current tasks if applicable"
    )
    return tool, {"todos": todos}, text, False, {}


def claude_code_lines(n_messages: int, seed: int = 0) -> Iterator[str]:
    """JSONL lines of one Claude Code transcript of about ``n_messages`` conversation rows."""
    rng = random.Random(seed)
    sid = f"c0de0000-0000-4000-8000-{seed:012d}"
    clock, uuid, rows = 0, 0, 0

    def record(kind: str, message: dict[str, Any], **fields: Any) -> str:
        nonlocal clock, uuid
        clock += rng.randint(2, 40)
        uuid += 1
        line = {
            "parentUuid": f"u-{uuid - 1}" if uuid > 1 else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": ROOT_DIR,
            "sessionId": sid,
            "version": "2.1.39",
            "gitBranch": "main",
            "type": kind,
            "uuid": f"u-{uuid}",
            "timestamp": f"2026-03-{1 + clock // 86_400 % 27:02d}T{clock // 3600 % 24:02d}:"
            f"{clock // 60 % 60:02d}:{clock % 60:02d}.000Z",
            "message": message,
        }
        line.update(fields)
        return json.dumps(line)

    model = "claude-opus-4-6"
    turn = 0
    while rows < n_messages:
        turn += 1
        yield record("user", {"role": "user", "content": rng.choice(_ASKS)})
        rows += 1
        calls = min(rng.randint(3, 25), max(1, (n_messages - rows - 1) // 2))
        for step in range(calls):
            mid = f"msg_{turn}_{step}"
            call_id = f"toolu_{turn:05d}_{step:03d}"
            name, args, text, is_error, meta = _tool(rng, turn)
            if step == 0:
                thought = f"The user wants this fixed; read {args.get('file_path', 'the code')}."
                block = {"type": "thinking", "thinking": thought, "signature": f"s{turn}"}
                yield record(
                    "assistant",
                    {"id": mid, "role": "assistant", "model": model, "content": [block]},
                )
            if rng.random() < 0.4:
                say = f"Let me {rng.choice(['check', 'look at', 'run', 'fix'])} that."
                yield record(
                    "assistant",
                    {
                        "id": mid,
                        "role": "assistant",
                        "model": model,
                        "content": [{"type": "text", "text": say}],
                    },
                )
            use = {"type": "tool_use", "id": call_id, "name": name, "input": args}
            yield record(
                "assistant", {"id": mid, "role": "assistant", "model": model, "content": [use]}
            )
            result = {"type": "tool_result", "tool_use_id": call_id, "content": text}
            if is_error:
                result["is_error"] = True
            yield record("user", {"role": "user", "content": [result]}, toolUseResult=meta)
            rows += 2
        reply = f"Done: {rng.choice(_FILES)} now handles the empty coupon; " + " ".join(
            rng.choice(_WORDS) for _ in range(rng.randint(20, 120))
        )
        yield record(
            "assistant",
            {
                "id": f"msg_{turn}_z",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply}],
            },
        )
        rows += 1


def claude_code_session(n_messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """The engine messages of a generated Claude Code transcript after our import."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    import django

    django.setup()
    from hermes_web.importers.formats.claude_code import parse
    from hermes_web.models import Message

    data = "\n".join(claude_code_lines(n_messages, seed)).encode()
    (session,) = parse(io.BytesIO(data), "bench.jsonl")
    rows = session.stream if session.stream is not None else iter(session.messages)
    return [
        Message.engine_dict(
            m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, m.reasoning
        )
        for m in rows
        if m.active and not m.meta and not m.archived
    ]

import base64
import json

import pytest

from compaction import generate_conversation, validate_tool_pairs


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 50, 333])
def test_exact_length_and_valid(n):
    messages = generate_conversation(n, seed=n)
    assert len(messages) == n
    assert validate_tool_pairs(messages) == []
    if n:
        assert messages[0]["role"] == "system"


def test_deterministic_per_seed():
    assert generate_conversation(120, seed=7) == generate_conversation(120, seed=7)
    assert generate_conversation(120, seed=7) != generate_conversation(120, seed=8)


def test_realistic_contents():
    messages = generate_conversation(600, seed=1)
    tools = {c["function"]["name"] for m in messages for c in m.get("tool_calls", [])}
    assert {"terminal", "read_file", "search_files", "web_extract", "write_file", "patch"} <= tools
    reads = [m for m in messages if m["role"] == "tool" and len(m["content"]) >= 5_000]
    assert reads
    assert all(len(m["content"]) <= 50_000 for m in messages if m["role"] == "tool")
    assert any("Traceback" in m["content"] for m in messages if m["role"] == "tool")
    assert any(m.get("reasoning_content") for m in messages)
    images = [
        p
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    assert images
    png = base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    json.dumps(messages)

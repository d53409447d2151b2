"""Which other agent wrote a file (Gemini CLI, Aider, OpenHands, Cline / Roo Code, Continue,
Qwen Code, Kimi CLI, Goose),
from its name and the keys at the start of its text.

Asked before the Hermes / OpenAI / Claude Code / Codex checks, so each test here looks
only at what those formats never begin with: a key the agent writes first (Gemini CLI's
``projectHash``, Cline's ``ts`` + ``say``/``ask``), its file name, or its header line.
"""

from __future__ import annotations

import re
from pathlib import Path

from hermes_web.importers.formats import goose, opencode

_HEAD = 4096  # the keys looked at are at the very start of the document

AIDER_HEADER = re.compile(r"\A\s*(?:#[^\n]*\n\s*)*?# aider chat started at ", re.IGNORECASE)
GEMINI_RECORDING = re.compile(r'\A\s*\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"\s*:')
GEMINI_LOGS = re.compile(r'\A\s*\[\s*\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"messageId"\s*:')
GEMINI_EMPTY_LOGS = re.compile(r"\A\s*\[\s*\]\s*\Z")
GEMINI_CHECKPOINT = re.compile(
    r'\A\s*(?:\{\s*"history"\s*:\s*)?\[\s*\{\s*"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"\s*:'
)
OPENHANDS_EVENT = re.compile(
    r'\A\s*(?:\{\s*"trajectory"\s*:\s*)?\[?\s*\{\s*"id"\s*:\s*-?\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:\s*"(?:user|agent|environment)"'
)
# OpenHands V1 (SDK): an event object (or a list of them) with a uuid id, or an event file of a
# conversation folder (events/event-00000-<uuid>.json).
OPENHANDS_V1_EVENT = re.compile(
    r'\A\s*\[?\s*\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:\s*"(?:user|agent|environment|hook)"'
)
OPENHANDS_V1_FILE = re.compile(r"^event-\d+-[^/]*\.json$")
CLINE_UI = re.compile(r'\A\s*\[\s*\{\s*"(?:ts|type|say|ask)"\s*:')
CLINE_UI_TYPE = re.compile(r'"type"\s*:\s*"(?:say|ask)"\s*,\s*"(?:say|ask)"\s*:')
CLINE_API_NAMES = ("api_conversation_history.json", "claude_messages.json")
ANTHROPIC_BLOCK = re.compile(r'"type"\s*:\s*"(?:tool_use|tool_result)"')
# Qwen Code: Claude-Code-like records whose message is a Gemini Content (role user|model
# with parts), a shape Claude Code never writes. Unescaped quotes: JSON structure only.
QWEN_MESSAGE = re.compile(r'"message"\s*:\s*\{\s*"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"\s*:')
# Kimi CLI's context.jsonl: its pseudo-roles, written by no other agent.
KIMI_PSEUDO_ROLE = re.compile(r'^\s*\{\s*"role"\s*:\s*"_(?:checkpoint|usage)"', re.MULTILINE)
KIMI_WIRE = re.compile(r'\A\s*\{\s*"type"\s*:\s*"metadata"\s*,\s*"protocol_version"\s*:')
CONTINUE_SESSION = re.compile(r'\A\s*\{\s*"(?:history|sessionId|title|workspaceDirectory)"\s*:')


def sniff(path: Path, head: str, file: str = "") -> str:
    """The format name of another agent's file, or "" when it is none of theirs (``file``:
    the name shown, an upload's own name where ``path`` is its temporary copy)."""
    name = Path(file or path.name).name.lower()
    start = head[:_HEAD]
    if name.endswith(".aider.chat.history.md") or AIDER_HEADER.match(start):
        return "aider"
    if GEMINI_RECORDING.match(start) or GEMINI_LOGS.match(start) or GEMINI_CHECKPOINT.match(start):
        return "gemini-cli"
    if name == "logs.json" and GEMINI_EMPTY_LOGS.match(head):  # a project with no prompt yet
        return "gemini-cli"
    if (
        OPENHANDS_EVENT.match(start)
        or (OPENHANDS_V1_EVENT.match(start) and '"kind"' in head)
        or (OPENHANDS_V1_FILE.match(name) and path.parent.name == "events")
        # a session folder's own file (V0 metadata.json, V1 base_state.json)
        or (path.name in ("metadata.json", "base_state.json") and (path.parent / "events").is_dir())
    ):
        return "openhands"
    if (
        path.name == "task_metadata.json"
        and (path.parent / "api_conversation_history.json").is_file()
    ):
        return "cline"  # a task folder's bookkeeping, read with the task
    if CLINE_UI.match(start) and CLINE_UI_TYPE.search(start[:400]):
        return "cline"
    if start.lstrip().startswith("[") and (
        name in CLINE_API_NAMES or (ANTHROPIC_BLOCK.search(head) and '"role"' in start)
    ):
        return "cline"
    if start.lstrip().startswith("{") and '"sessionId"' in start and QWEN_MESSAGE.search(head):
        return "qwen-code"
    if start.lstrip().startswith("{") and (
        KIMI_PSEUDO_ROLE.search(head) or (name == "wire.jsonl" and KIMI_WIRE.match(start))
    ):
        return "kimi-cli"
    if start.lstrip().startswith("{") and goose.is_goose_jsonl(start):
        return "goose"
    if (
        CONTINUE_SESSION.match(start)
        and '"history"' in head
        and ('"contextItems"' in head or '"workspaceDirectory"' in head)
    ):
        return "continue"
    if opencode.is_storage_session(path, start):
        return "opencode"
    return ""

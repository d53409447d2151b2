"""One module over 450 lines on purpose: the demo is one fake provider (reading the prompt,
planning with its own tools or a client's, answering, its litellm handler); ~90 of its lines
are the stopword list.

The offline demo model: a litellm custom provider ("hermes-demo/agent"), no key, no network.

It is no language model. It plans tool calls the way a curious agent would — list the
workspace, search for the most specific word of the question, read the files that matter (and
the biggest ones it has not read yet), then answer with what it found — so a newcomer sees the
whole loop: tool outputs piling up, the provider-reported prompt growing past the threshold,
compaction in the background, and the next prompt carrying the summary instead of the middle.

Usage is honest: ``prompt_tokens`` is the tiktoken count of the messages it received (the
engine's counter), ``completion_tokens`` the count of what it sent back. It only plans from
what is in its prompt, so after a compaction it has "forgotten" which files it read and reads
them again, as a real agent would.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from compaction import PREFIX_OPENING, CompactionConfig, count_messages_tokens
from compaction.messages import content_text, parse_arguments
from hermes_web.agent.tools.workspace import READ_MAX_CHARS
from hermes_web.llm_models import DEMO_CONTEXT_LENGTH, DEMO_MODEL, DEMO_MODEL_LABEL

PROVIDER = "hermes-demo"
# Seconds between streamed words: slow enough to watch the reply arrive, fast enough for tests.
STREAM_DELAY = 0.01
# One file per turn, so the context climbs over a few messages rather than in one jump.
READS_PER_TURN = 1
_TOKEN_CONFIG = CompactionConfig(model="gpt-4o-mini")
# Its own tools: offered all of them (the chat's agent), it explores; offered others (a /v1
# client's), it calls those instead.
OWN_TOOLS = frozenset({"list_files", "search_files", "read_file"})
# Room kept free under the window for its reply and the tool calls' own bytes.
REPLY_ROOM = 2_000
STOPWORDS = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "can",
        "could",
        "did",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "explain",
        "file",
        "files",
        "find",
        "from",
        "further",
        "have",
        "having",
        "here",
        "hello",
        "into",
        "itself",
        "just",
        "know",
        "look",
        "more",
        "most",
        "much",
        "other",
        "over",
        "please",
        "same",
        "should",
        "show",
        "some",
        "such",
        "tell",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "want",
        "what",
        "when",
        "where",
        "which",
        "while",
        "whom",
        "with",
        "would",
        "your",
        "summarize",
        "summary",
        "workspace",
        "project",
        "anything",
        "something",
        "everything",
        "thanks",
        "thank",
        "give",
        "read",
        "search",
        "list",
        "happened",
        "happen",
    ]
)


# -- reading the prompt ------------------------------------------------------------------------


def _prompt_text(content: Any) -> str:
    # Images left out: "[image]" would become a word the demo searches the workspace for.
    return content_text(content, images=False)


def _json(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class Prompt:
    """What the demo model can tell from its messages."""

    def __init__(self, messages: list[dict]) -> None:
        self.messages = messages
        self.tokens = prompt_tokens(messages)
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        self.question = _prompt_text(messages[last_user].get("content")) if last_user >= 0 else ""
        self.turn = messages[last_user + 1 :]
        self.has_summary = any(PREFIX_OPENING in _prompt_text(m.get("content")) for m in messages)
        # tool_call_id -> (name, arguments) for every call still visible, and the results.
        self.calls: dict[str, tuple[str, dict]] = {}
        self.results: list[tuple[str, dict, str, bool]] = []  # name, args, result, in this turn
        turn_ids = {id(m) for m in self.turn}
        for message in messages:
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name") or ""
                self.calls[call.get("id") or ""] = (name, parse_arguments(call))
            if message.get("role") == "tool":
                name, args = self.calls.get(message.get("tool_call_id") or "", ("", {}))
                self.results.append(
                    (name, args, _prompt_text(message.get("content")), id(message) in turn_ids)
                )

    def calls_this_turn(self, name: str) -> list[dict]:
        return [args for n, args, _, now in self.results if now and n == name]

    def listing(self) -> dict[str, int] | None:
        """path -> size from the newest unfolded list_files result in the prompt."""
        for name, _, result, _ in reversed(self.results):
            data = _json(result) if name == "list_files" else None
            if data and isinstance(data.get("entries"), list):
                return {
                    e["path"]: int(e.get("size") or 0)
                    for e in data["entries"]
                    if isinstance(e, dict) and e.get("type") == "file" and "path" in e
                }
        return None

    def read_paths(self) -> set[str]:
        return {str(args.get("path")) for name, args in self.calls.values() if name == "read_file"}


def prompt_tokens(messages: list[dict]) -> int:
    """The prompt's size as the demo counts it (the engine's counter, as its usage reports)."""
    return sum(count_messages_tokens(messages, _TOKEN_CONFIG))


def read_cost(size: int) -> int:
    """Tokens a read of a ``size``-byte file adds, counted high: the tool caps what it returns
    at READ_MAX_CHARS and numbers each line; dense data runs ~3 characters a token."""
    return min(size, READ_MAX_CHARS) * 4 // 9 + 50


def keyword(question: str) -> str:
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_\-]{3,}", question)
    candidates = [w for w in words if w.lower() not in STOPWORDS]
    if not candidates:
        return ""
    return max(candidates, key=len).lower()


KIND_WORDS = {
    ".csv": ("csv", "data", "readings"),
    ".log": ("log", "logs"),
    ".toml": ("toml", "config"),
    ".py": ("python", "code", "source"),
    ".md": ("docs", "markdown", "notes"),
}


def _mentioned(question: str, paths: list[str]) -> list[str]:
    """Paths the question names: by path, file name or stem first, then by kind ("the csv")."""
    lowered = question.lower()
    words = set(re.findall(r"[a-z0-9]+", lowered))
    named, kinds = [], []
    for path in paths:
        p = PurePosixPath(path)
        if (
            path.lower() in lowered
            or p.name.lower() in lowered
            or (len(p.stem) > 3 and p.stem.lower() in lowered)
        ):
            named.append(path)
        elif words & set(KIND_WORDS.get(p.suffix, ())):
            kinds.append(path)
    return named + kinds


# -- planning ----------------------------------------------------------------------------------


_REF_RE = re.compile(r"\[ref:(\d+)\]")
_RECALL_WORDS = ("recall", "folded", "full output", "original output", "[ref:")


def wanted_ref(prompt: Prompt) -> int | None:
    """The reference to recall when the question asks for a folded output: the one it names
    (``[ref:N]`` or ``ref N``), else the newest reference in the prompt."""
    question = prompt.question.lower()
    if not any(word in question for word in _RECALL_WORDS):
        return None
    named = re.search(r"ref\s*[:#]?\s*(\d+)", question)
    if named:
        return int(named.group(1))
    found = [
        int(n) for m in prompt.messages for n in _REF_RE.findall(_prompt_text(m.get("content")))
    ]
    return found[-1] if found else None


def plan(
    messages: list[dict],
    *,
    allow_tools: bool = True,
    tools: list[dict] | None = None,
    tool_choice: Any = None,
) -> tuple[str, list[dict]]:
    """The next step: ``("", tool_calls)`` to use tools, or ``(reply_text, [])`` to answer.

    ``tools`` are the tools offered (None: its own); offered others than its own, it calls
    those (the one ``tool_choice`` names, if it names one) instead of exploring.
    """
    prompt = Prompt(messages)
    if not allow_tools or tool_choice == "none" or not prompt.question.strip():
        return reply(prompt), []
    offered = _offered(tools)
    if offered is not None and not set(offered) >= OWN_TOOLS:
        return client_plan(prompt, offered, tool_choice)
    # Asked for a folded output: fetch it back with recall, then answer with it.
    if prompt.calls_this_turn("recall"):
        return reply(prompt), []
    ref = wanted_ref(prompt)
    if ref is not None:
        return "", [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": "recall", "arguments": json.dumps({"ref": ref})},
            }
        ]
    listing = prompt.listing()
    listed_now = bool(prompt.calls_this_turn("list_files"))
    searched_now = bool(prompt.calls_this_turn("search_files"))
    read_now = prompt.calls_this_turn("read_file")
    calls: list[tuple[str, dict]] = []
    if listing is None and not listed_now:
        calls.append(("list_files", {"path": ".", "depth": 4}))
    word = keyword(prompt.question)
    searching = bool(word) and not searched_now
    if searching:
        calls.append(
            ("search_files", {"pattern": word, "path": ".", "target": "content", "limit": 100})
        )
    # Reads wait for the search's hits (next round), as an agent reads what it found.
    if listing is not None and not read_now and not searching:
        for path in choose_reads(prompt, listing):
            calls.append(("read_file", {"path": path}))
    if not calls:
        return reply(prompt), []
    return "", [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for name, args in calls
    ]


def choose_reads(prompt: Prompt, listing: dict[str, int]) -> list[str]:
    """Files named in the question, then the search's hits, then the README, then the biggest
    unread; only files whose read still fits its window (so its prompt never outgrows it)."""
    paths = sorted(listing)
    already = prompt.read_paths()
    chosen: list[str] = []
    room = DEMO_CONTEXT_LENGTH - REPLY_ROOM - prompt.tokens

    def fits(path: str) -> bool:
        return read_cost(listing[path]) + sum(read_cost(listing[p]) for p in chosen) <= room

    # A file the question names, plus READS_PER_TURN found by searching or exploring.
    named = [p for p in _mentioned(prompt.question, paths) if fits(p)][:1]
    chosen.extend(named)

    def take(path: str) -> None:
        if (
            path in listing
            and path not in chosen
            and len(chosen) < READS_PER_TURN + len(named)
            and fits(path)
        ):
            chosen.append(path)

    for name, _, result, now in prompt.results:
        data = _json(result) if (now and name == "search_files") else None
        if data and isinstance(data.get("matches"), list):
            hit = {
                m["path"]
                for m in data["matches"]
                if isinstance(m, dict) and m.get("path") in listing
            }
            # The biggest file with hits first: that is usually where the story is (logs, data).
            for path in sorted(hit, key=lambda p: -listing[p]):
                if path not in already:
                    take(path)
    for path in paths:
        if PurePosixPath(path).name.lower().startswith("readme") and path not in already:
            take(path)
    for path in sorted(paths, key=lambda p: -listing[p]):
        if path not in already:
            take(path)
    if not chosen and paths:
        take(max(paths, key=lambda p: listing[p]))  # everything read: re-read the biggest
    return chosen


def _offered(tools: list[dict] | None) -> dict[str, dict] | None:
    """name -> function schema of the tools offered, or None when none were."""
    if not tools:
        return None
    offered: dict[str, dict] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            offered[str(function["name"])] = function
    return offered or None


def _chosen_name(tool_choice: Any) -> str:
    """The function ``tool_choice`` names (OpenAI's ``{"type": "function", ...}``), or ""."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        if isinstance(function, dict):
            return str(function.get("name") or "")
        return str(tool_choice.get("name") or "")
    return ""


def _fitting_tool(question: str, offered: dict[str, dict]) -> str:
    """The offered tool whose name and description share most words with the question."""
    words = set(re.findall(r"[a-z0-9]+", question.lower()))

    def score(name: str) -> int:
        described = f"{name.replace('_', ' ')} {offered[name].get('description') or ''}"
        return len(words & set(re.findall(r"[a-z0-9]+", described.lower())))

    return max(offered, key=score)  # max keeps the first of equals: the client's order


def _arguments(function: dict, question: str) -> dict[str, Any]:
    """Arguments for a client's tool from its JSON schema: every required property, a word
    of the question for strings (the whole question for a query), the first of an enum."""
    schema = function.get("parameters") or {}
    properties = schema.get("properties") or {} if isinstance(schema, dict) else {}
    required = [name for name in (schema.get("required") or []) if name in properties]
    # The question's most specific word the tool does not name itself ("Paris", not "weather").
    described = f"{function.get('name') or ''} {function.get('description') or ''}".lower()
    own = set(re.findall(r"[a-z0-9]+", described.replace("_", " ")))
    words = [
        w
        for w in re.findall(r"[A-Za-z_][A-Za-z0-9_\-./]{2,}", question)
        if w.lower() not in STOPWORDS and w.lower() not in own
    ]
    word = max(words, key=len) if words else question.strip()
    values: dict[str, Any] = {}
    for name in required:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        kind = spec.get("type")
        if spec.get("enum"):
            values[name] = spec["enum"][0]
        elif kind in ("integer", "number"):
            values[name] = 1
        elif kind == "boolean":
            values[name] = False
        elif kind == "array":
            values[name] = []
        elif kind == "object":
            values[name] = {}
        elif name in ("query", "question", "prompt", "text", "q"):
            values[name] = question.strip()
        else:
            values[name] = word
    return values


def client_plan(prompt: Prompt, offered: dict[str, dict], tool_choice: Any) -> tuple[str, list]:
    """A client's tools: call the one ``tool_choice`` names (or, on "required", or once per
    turn on "auto", the best fitting one), then answer from its result."""
    named = _chosen_name(tool_choice)
    forced = bool(named and named in offered) or tool_choice == "required"
    answered = any(now for _, _, _, now in prompt.results)
    if answered and not forced:
        return reply(prompt), []
    name = named if named in offered else _fitting_tool(prompt.question, offered)
    arguments = _arguments(offered[name], prompt.question)
    return "", [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    ]


# -- answering ---------------------------------------------------------------------------------


def _describe(path: str, data: dict) -> str:
    content = str(data.get("content") or "")
    lines = [line.split("|", 1)[1] if "|" in line else line for line in content.splitlines()]
    size = data.get("file_size") or len(content)
    head = f"`{path}` ({data.get('total_lines', len(lines)):,} lines, {size:,} bytes)"
    suffix = PurePosixPath(path).suffix
    if suffix == ".py":
        names = [
            m.group(2) for line in lines if (m := re.match(r"^(class|def|async def) (\w+)", line))
        ]
        return f"{head} defines {', '.join(f'`{n}`' for n in names[:8]) or 'no top-level names'}."
    if suffix == ".md":
        headings = [line.lstrip("# ").strip() for line in lines if line.startswith("#")]
        return f"{head} — sections: {', '.join(headings[:6]) or 'none'}."
    if suffix == ".log":
        errors = [i for i, line in enumerate(lines, 1) if " ERROR " in line]
        warnings = sum(" WARNING " in line for line in lines)
        first = (
            f" The first error is on line {errors[0]}: `{lines[errors[0] - 1][:110]}`."
            if errors
            else ""
        )
        return f"{head} has {len(errors):,} ERROR and {warnings:,} WARNING lines.{first}"
    if suffix == ".csv":
        header = lines[0] if lines else ""
        return f"{head}: {max(0, len(lines) - 1):,} rows with columns `{header}`."
    if suffix == ".toml":
        tables = sum(line.startswith("[[") for line in lines)
        return f"{head} holds {tables} entries."
    first = next((line for line in lines if line.strip()), "")
    return f"{head} starts with `{first[:100]}`."


def reply(prompt: Prompt) -> str:
    if not prompt.question.strip():
        return f"Hello — I am the {DEMO_MODEL_LABEL}. Ask me about the workspace."
    parts = [
        f"**{DEMO_MODEL_LABEL[0].upper()}{DEMO_MODEL_LABEL[1:]}** — here is what I found for you."
    ]
    if prompt.has_summary:
        parts.append(
            "_(Earlier turns were compacted: I am working from the context summary above.)_"
        )
    bullets = []
    for name, args, result, now in prompt.results:
        if not now:
            continue
        data = _json(result) or {}
        if data.get("error"):
            bullets.append(f"`{name}` failed: {data['error']}")
        elif name == "list_files":
            files = [
                e
                for e in data.get("entries", [])
                if isinstance(e, dict) and e.get("type") == "file"
            ]
            total = sum(int(e.get("size") or 0) for e in files)
            bullets.append(f"The workspace has {len(files)} files ({total / 1024:,.0f} KB).")
        elif name == "search_files":
            hits: dict[str, int] = {}
            for match in data.get("matches", []):
                hits[match.get("path", "?")] = hits.get(match.get("path", "?"), 0) + 1
            where = ", ".join(
                f"`{p}` ({n})" for p, n in sorted(hits.items(), key=lambda kv: -kv[1])[:3]
            )
            bullets.append(
                f"Searching for `{args.get('pattern')}` gave {data.get('total_count', 0)} matches"
                + (f", mostly in {where}." if where else ".")
            )
        elif name == "read_file":
            bullets.append(_describe(str(args.get("path") or data.get("path") or "?"), data))
        elif name == "recall":
            what = data.get("tool_name") or data.get("role") or "message"
            shown = str(data.get("content") or "")[:2_000]
            bullets.append(
                f"Recalled `[ref:{args.get('ref')}]`, the full {what} output "
                f"({int(data.get('total_chars') or 0):,} chars):\n\n```\n{shown}\n```"
            )
        elif name not in OWN_TOOLS:
            said = " ".join(result.split())
            said = said if len(said) <= 200 else said[:199] + "…"
            bullets.append(f"`{name or 'your tool'}` returned: {said or '(nothing)'}")
    if bullets:
        parts.append("\n".join(f"- {b}" for b in bullets))
    else:
        parts.append("I did not need any tool for this one.")
    parts.append(
        "I am not a real language model: I explore the workspace so that tool outputs pile up "
        "and you can watch the context grow past the compaction threshold. Configure "
        "`HERMES_CHAT_MODEL` for real answers."
    )
    return "\n\n".join(parts)


def usage_for(messages: list[dict], text: str, tool_calls: list[dict]) -> dict[str, int]:
    prompt_tokens = sum(count_messages_tokens(messages, _TOKEN_CONFIG))
    out = text + (json.dumps(tool_calls) if tool_calls else "")
    completion_tokens = sum(
        count_messages_tokens([{"role": "assistant", "content": out}], _TOKEN_CONFIG)
    )
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


# -- the litellm provider ----------------------------------------------------------------------


def _allow_tools(optional_params: dict) -> bool:
    return optional_params.get("tool_choice") != "none"


def _plan_within_window(messages: list[dict], optional_params: dict) -> tuple[str, list[dict]]:
    """Refuse a prompt over the demo's window as a provider does (litellm's
    ContextWindowExceededError, a 400), else plan with the tools offered."""
    tokens = prompt_tokens(messages)
    if tokens > DEMO_CONTEXT_LENGTH:
        from litellm import ContextWindowExceededError

        raise ContextWindowExceededError(
            message=(
                f"This model's maximum context length is {DEMO_CONTEXT_LENGTH:,} tokens; "
                f"the messages are {tokens:,} tokens."
            ),
            model=DEMO_MODEL,
            llm_provider=PROVIDER,
        )
    return plan(
        messages,
        allow_tools=_allow_tools(optional_params),
        tools=optional_params.get("tools"),
        tool_choice=optional_params.get("tool_choice"),
    )


def _build_handler():
    from litellm import CustomLLM
    from litellm.types.utils import Message, Usage

    class DemoLLM(CustomLLM):
        def completion(
            self,
            model,
            messages,
            api_base,
            custom_prompt_dict,
            model_response,
            print_verbose,
            encoding,
            api_key,
            logging_obj,
            optional_params,
            *args,
            **kwargs,
        ):
            text, calls = _plan_within_window(messages, optional_params)
            model_response.choices[0].message = Message(
                content=text or None, role="assistant", tool_calls=calls or None
            )
            if calls:
                model_response.choices[0].finish_reason = "tool_calls"
            model_response.model = DEMO_MODEL
            model_response.usage = Usage(**usage_for(messages, text, calls))
            return model_response

        # GenericStreamingChunk is a TypedDict: the plain dicts yielded below are of that shape.
        def streaming(  # type: ignore[override]
            self,
            model,
            messages,
            api_base,
            custom_prompt_dict,
            model_response,
            print_verbose,
            encoding,
            api_key,
            logging_obj,
            optional_params,
            *args,
            **kwargs,
        ) -> Iterator[dict]:
            # Planned before the first chunk: a refusal is raised by the call, not mid-stream.
            text, calls = _plan_within_window(messages, optional_params)
            return _chunks(messages, text, calls)

    return DemoLLM()


def _chunks(messages: list[dict], text: str, calls: list[dict]) -> Iterator[dict]:
    """The stream of a planned step: the words one by one, then the calls, then usage."""
    for piece in re.findall(r"\S+\s*|\s+", text):
        yield {
            "text": piece,
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
            "tool_use": None,
        }
        if STREAM_DELAY:
            time.sleep(STREAM_DELAY)
    for index, call in enumerate(calls):
        yield {
            "text": "",
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
            "tool_use": {**call, "index": index},
        }
    yield {
        "text": "",
        "is_finished": True,
        "finish_reason": "tool_calls" if calls else "stop",
        "usage": usage_for(messages, text, calls),
        "index": 0,
        "tool_use": None,
    }


def register() -> None:
    """Make ``hermes-demo/agent`` callable through litellm.completion (idempotent)."""
    import litellm

    if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append(
            {"provider": PROVIDER, "custom_handler": _build_handler()}
        )

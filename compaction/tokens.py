"""Token counting with tiktoken, offline.

The BPE files for ``cl100k_base``, ``o200k_base`` and ``p50k_base`` ship in
``compaction/tiktoken_cache`` so no download is ever attempted; any model whose encoding is
not one of those falls back to ``o200k_base``. Counts for non-OpenAI models are estimates.

A message's count is: tokens of its text content + tokens of its ``tool_calls`` JSON +
tokens of its ``tool_call_id`` + ``per_message_overhead`` + ``image_tokens`` per image part.
Base64 image data is never tokenized. Reasoning fields are not counted.

Any callable ``str -> int`` can replace tiktoken (the ``TokenCounter`` protocol), e.g.
``lambda text: len(text.split())`` in tests.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from compaction.messages import Message, content_text, image_part_count

TIKTOKEN_CACHE = Path(__file__).resolve().parent / "tiktoken_cache"
# litellm overwrites TIKTOKEN_CACHE_DIR on first use unless CUSTOM_TIKTOKEN_CACHE_DIR is set.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))
os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))

import tiktoken  # noqa: E402  (must come after the cache dir is set)

if TYPE_CHECKING:
    from compaction.config import CompactionConfig

__all__ = [
    "estimate_message_tokens",
    "FALLBACK_ENCODING",
    "OFFLINE_ENCODINGS",
    "TokenCounter",
    "count_message_tokens",
    "count_appended",
    "count_messages_tokens",
    "count_text_tokens",
    "get_encoding",
    "message_token_text",
    "piecewise_counter",
    "tiktoken_counter",
    "token_length",
]

OFFLINE_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "p50k_base"})
FALLBACK_ENCODING = "o200k_base"


class TokenCounter(Protocol):
    """Anything that counts the tokens of a string."""

    def __call__(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


@functools.cache
def get_encoding(model: str) -> tiktoken.Encoding:
    """The cached tiktoken encoding for a model name (or encoding name).

    Unknown models and encodings that are not available offline fall back to ``o200k_base``.
    """
    name = model.split("/")[-1]
    if name in OFFLINE_ENCODINGS:
        return tiktoken.get_encoding(name)
    try:
        encoding_name = tiktoken.encoding_name_for_model(name)
    except KeyError:
        encoding_name = FALLBACK_ENCODING
    if encoding_name not in OFFLINE_ENCODINGS:
        encoding_name = FALLBACK_ENCODING
    return tiktoken.get_encoding(encoding_name)


def token_length(encoding: tiktoken.Encoding, text: str, suffix: str = "") -> int:
    """``len(encoding.encode_ordinary(text + suffix))`` without the list of token ids, and
    without a copy of a long ``text``.

    The ids come back as one packed buffer of 4-byte integers (tiktoken's own
    ``encode_to_numpy`` path; with no special token allowed it is the ordinary encoding)
    instead of a list of Python ints: 36 bytes a token, 360 KB for one 40 KB tool result,
    was the peak of a small compaction. Surrogates are replaced as ``encode_ordinary`` does.

    A long text that is not plain ASCII (or has a ``suffix``) goes to tiktoken in pieces cut
    where the sum of the pieces' counts is the exact count (``_piece_break``): CPython hands
    such a string to tiktoken as UTF-8 built through a buffer of 3 bytes a character, kept
    with the string (a 50,000-character system prompt holding one dash peaked at 200 KB,
    4 times its UTF-8 size), and ``text + suffix`` would copy the text first.
    """
    if len(text) <= _PIECE_CHARS or (not suffix and text.isascii()):
        return _encoded_length(encoding, text + suffix)
    total, start, breaks = 0, 0, _piece_break(encoding)
    while start + _PIECE_CHARS < len(text):
        cut = breaks.search(text, start + _PIECE_CHARS)
        if cut is None:
            break
        total += _encoded_length(encoding, text[start : cut.start()])
        start = cut.start()
    return total + _encoded_length(encoding, text[start:] + suffix)


def _encoded_length(encoding: tiktoken.Encoding, text: str) -> int:
    if not text:
        return 0
    core = encoding._core_bpe
    try:
        return memoryview(core.encode_to_tiktoken_buffer(text, _NO_SPECIAL)).nbytes // 4
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return memoryview(core.encode_to_tiktoken_buffer(text, _NO_SPECIAL)).nbytes // 4


# Characters of non-ASCII text handed to tiktoken at once (see ``token_length``).
_PIECE_CHARS = 8_192
_NO_SPECIAL: frozenset[str] = frozenset()


@functools.cache
def tiktoken_counter(model: str) -> TokenCounter:
    """A ``TokenCounter`` backed by tiktoken for ``model`` (cached per model)."""
    encoding = get_encoding(model)

    def count(text: str) -> int:
        return token_length(encoding, text)

    return count


# A line start that no piece of these encodings' pre-split crosses: every pattern that can
# take a "\n" goes on only with more whitespace (or, in o200k_base, "/"), so the text's
# tokens are the sum of its parts' tokens cut here (BPE merges only inside a piece). The
# "\n" must follow a non-space: p50k_base's ``\s+(?!\S)`` splits a run of whitespace before
# text ("\n\n." is "\n", "\n", ".") but not at the end of a text.
_PIECE_BREAK = re.compile(r"(?<=\S\n)(?=[^\s/])")
# cl100k_base and o200k_base try ``\s*[\r\n]+`` before any other whitespace pattern, so a
# run of newlines always ends its piece: a line that starts with spaces or tabs before its
# text (indented code, the line numbers of a Claude Code Read result) can be cut at too.
_INDENT_BREAK = re.compile(r"(?<=\n)(?=[ \t]+\S|[^\s/])")


def _piece_break(encoding: tiktoken.Encoding) -> re.Pattern[str]:
    return _INDENT_BREAK if encoding.name in ("cl100k_base", "o200k_base") else _PIECE_BREAK


# The cuts above with the "\n" before each consumed: a regex with a literal first character is
# searched from newline to newline, where a zero-width one is tried at every position (a
# quarter of a millisecond on each 40,000-char text the ledger's fitting counts).
_PIECE_SPLIT = re.compile(r"\n(?<=\S\n)(?=[^\s/])")
_INDENT_SPLIT = re.compile(r"\n(?=[ \t]+\S|[^\s/])")


def _piece_split(encoding: tiktoken.Encoding) -> re.Pattern[str]:
    return _INDENT_SPLIT if encoding.name in ("cl100k_base", "o200k_base") else _PIECE_SPLIT


def piecewise_counter(model: str) -> TokenCounter:
    """A tiktoken counter for ``model`` that counts a text line by line (cut only where no
    pre-split piece spans, so the sum is the exact count) and remembers each line's count.

    For the ledger's fitting loop, which counts many texts that share most of their lines:
    each distinct line is encoded once. One per compaction: the memo lives with it.
    """
    encoding = get_encoding(model)
    splits = _piece_split(encoding)
    # A piece the split cut the "\n" off → the count of the piece with its "\n" (built only
    # when it is first met); a text's last piece has none, so it has a memo of its own.
    lines: dict[str, int] = {}
    ends: dict[str, int] = {}

    def count(text: str) -> int:
        parts = splits.split(text)
        last = parts.pop()
        total = 0
        for part in parts:
            known = lines.get(part)
            if known is None:
                known = lines[part] = token_length(encoding, part + "\n")
            total += known
        known = ends.get(last)
        if known is None:
            known = ends[last] = token_length(encoding, last)
        return total + known

    return count


def count_appended(model: str, text: str, known: int, suffix: str) -> int:
    """Tokens of ``text + suffix`` under ``model``'s encoding, given ``known``, the tokens of
    ``text``: only the text from a line start near its end where no pre-split piece spans
    (``_piece_break``: the counts of the two parts add up to the whole's, in ``text`` and in
    ``text + suffix`` alike) and the suffix are encoded.

    For the compaction note appended to a system prompt whose count is known (a coding
    agent's prompt is 20,000-60,000 characters: encoding it again was a tenth of a small
    compaction). Exact: a text with no such line start is counted whole.
    """
    encoding = get_encoding(model)
    breaks = _piece_break(encoding)
    cut = breaks.search(text, max(0, len(text) - _APPENDED_TAIL_CHARS)) or breaks.search(text)
    if cut is None:
        return token_length(encoding, text, suffix)
    tail = text[cut.start() :]
    return known - token_length(encoding, tail) + token_length(encoding, tail, suffix)


_APPENDED_TAIL_CHARS = 2_048  # where ``count_appended`` looks for its cut first


def count_text_tokens(text: str, model: str = "gpt-4o-mini") -> int:
    """Tokens in ``text`` under the model's encoding."""
    return tiktoken_counter(model)(text)


def message_token_text(message: Message) -> tuple[str, int]:
    """The text that is tokenized for a message, and its number of image parts."""
    text = content_text(message.get("content"), images=False)
    calls = message.get("tool_calls")
    if calls:
        text += json.dumps(calls, ensure_ascii=False, default=str)
    call_id = message.get("tool_call_id")
    if call_id:
        text += str(call_id)
    return text, image_part_count(message.get("content"))


def count_message_tokens(
    message: Message,
    config: CompactionConfig,
    counter: TokenCounter | None = None,
) -> int:
    """Tokens of one message (see the module docstring for the formula)."""
    count = counter or tiktoken_counter(config.model)
    text, images = message_token_text(message)
    return count(text) + config.per_message_overhead + images * config.image_tokens


def count_messages_tokens(
    messages: Sequence[Message],
    config: CompactionConfig,
    counter: TokenCounter | None = None,
) -> list[int]:
    """Tokens of every message, in order.

    With tiktoken, long lists are counted on 2 threads (tiktoken releases the GIL). Each
    message's text is built, encoded and dropped in turn: only the counts are kept, never
    every text or token-id list at once (36 bytes a token: 1.2 GB at 50k messages).
    """
    if counter is not None:
        return [count_message_tokens(m, config, counter) for m in messages]
    encoding = get_encoding(config.model)
    overhead, image_tokens = config.per_message_overhead, config.image_tokens

    def count(chunk: Sequence[Message]) -> list[int]:
        counts = []
        # A plain-text row's count by (content, call id): a result read twice, a command's
        # output repeated or a pasted prompt is encoded once. The key holds the row's own
        # string, never a copy (the text with the call id appended is built only to count).
        memo: dict[tuple[str, str], int] = {}
        for message in chunk:
            content = message.get("content")
            if type(content) is str and not message.get("tool_calls"):
                call_id = message.get("tool_call_id")
                key = (content, str(call_id) if call_id else "")
                known = memo.get(key)
                if known is None:
                    known = memo[key] = token_length(encoding, content, key[1]) + overhead
                counts.append(known)
                continue
            text, images = message_token_text(message)
            length = token_length(encoding, text)
            counts.append(length + overhead + images * image_tokens)
        return counts

    # Sized by string contents only (tool-call JSON and parts are small beside them): the
    # size decides the threading and the chunks, never a count.
    sizes = [len(c) if type(c := m.get("content")) is str else 0 for m in messages]
    if sum(sizes) < _BATCH_FROM_CHARS:
        # A thread pool costs more than encoding a few MB in turn (the hermes profile counts
        # only the head and the tail's reach exactly).
        return count(messages)
    chunks: list[Sequence[Message]] = []
    first, size = 0, 0
    for i, chars in enumerate(sizes):
        if size >= _CHUNK_CHARS:
            chunks.append(messages[first:i])
            first, size = i, 0
        size += chars
    chunks.append(messages[first:])
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        return [c for counts in pool.map(count, chunks) for c in counts]


_BATCH_FROM_CHARS = 1_000_000  # below this much text, counting runs in this thread
_CHUNK_CHARS = 250_000  # text handed to one thread at a time


def estimate_message_tokens(message: Message, config: CompactionConfig) -> int:
    """A cheap estimate (4 chars a token, as Hermes estimates): content chars + tool-call
    name and argument chars + the call id, over 4, plus the overhead and image cost."""
    content = message.get("content")
    chars = len(content) if type(content) is str else len(content_text(content, images=False))
    calls = message.get("tool_calls")
    if calls and isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                args = fn.get("arguments")
                chars += len(args) if isinstance(args, str) else len(str(args or ""))
                chars += len(str(fn.get("name") or "")) + 40
    call_id = message.get("tool_call_id")
    if call_id:
        chars += len(str(call_id))
    images = image_part_count(content)
    return (chars + 3) // 4 + config.per_message_overhead + images * config.image_tokens

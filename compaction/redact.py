"""Secret redaction for the summarizer input and the deterministic summary (hermes profile).

One module holds every pattern: provider API keys (OpenAI, Anthropic, OpenRouter, Google,
GitHub, GitLab, Slack, Stripe, Hugging Face, Groq, xAI), bearer tokens, JWTs, AWS access
keys and secret keys, PEM private-key blocks, ``password=``/``secret:``/``token=``
assignments, and URLs with credentials. Matches become ``[REDACTED:<kind>]``.

Cheap by construction: every pattern is anchored on a literal (``"sk-"``, ``"eyJ"``,
``"AKIA"``, ``"-----BEGIN"``, ``"://"`` …). One RE2 ``Set`` scan of the text (a DFA over
every family's literals at once, linear in the text) tells which literals occur, so a text
without any of them is never run through a regex at all, and the patterns that do run are
one alternation per family rather than one pass per key shape. Hermes spends most of its
compaction time in redaction (reference §14: 72–81 %); the bench prints our share.
"""

from __future__ import annotations

import re
from typing import Any

import re2

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED:{kind}]"

# (kind, literal prefilter(s), compiled pattern). A pattern's group "secret", when present,
# is the only part replaced (the key name of an assignment stays readable).
_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (
        "private_key",
        ("-----BEGIN",),
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        ),
    ),
    (
        "api_key",
        (
            "sk-",
            "sk_",
            "rk_",
            "pk_live",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "xox",
            "hf_",
            "gsk_",
            "xai-",
            "AIza",
        ),
        re.compile(
            r"(?<![A-Za-z0-9])(?:"
            r"sk-(?:ant-|proj-|or-v1-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"
            r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
            r"|pk_live_[A-Za-z0-9]{16,}"
            r"|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|github_pat_[A-Za-z0-9_]{40,}"
            r"|glpat-[A-Za-z0-9_\-]{20,}"
            r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
            r"|hf_[A-Za-z0-9]{30,}"
            r"|gsk_[A-Za-z0-9]{40,}"
            r"|xai-[A-Za-z0-9]{40,}"
            r"|AIza[0-9A-Za-z_\-]{35}"
            r")"
        ),
    ),
    (
        "aws_access_key",
        ("AKIA", "ASIA"),
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    (
        "jwt",
        ("eyJ",),
        re.compile(
            r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
        ),
    ),
    (
        "bearer_token",
        ("Bearer ", "bearer ", "BEARER "),
        re.compile(r"(?i:bearer)\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
    ),
    (
        "url_credentials",
        ("://",),
        re.compile(
            r"://[^\s/@:'\"<>]+:(?P<secret>[^\s/@'\"<>]+)@"  # anchored on the literal "://"
        ),
    ),
    (
        "aws_secret_key",
        ("aws_secret", "AWS_SECRET", "SecretAccessKey"),
        re.compile(
            r"(?i:aws_secret_access_key|aws_secret_key|secretaccesskey)[\"']?\s*[:=]\s*[\"']?"
            r"(?P<secret>[A-Za-z0-9/+=]{40})"
        ),
    ),
    (
        "password",
        ("password", "Password", "PASSWORD", "passwd", "Passwd", "PASSWD", "pwd", "Pwd", "PWD"),
        re.compile(
            r"(?i:password|passwd|pwd)[A-Za-z0-9_]*[\"']?\s*(?:=|:)\s*[\"']?"
            r"(?P<secret>(?!\[REDACTED)[^\s\"',;&}]{4,})"
        ),
    ),
    (
        "secret",
        (
            "secret",
            "SECRET",
            "Secret",
            "token",
            "TOKEN",
            "Token",
            "api_key",
            "API_KEY",
            "apikey",
            "APIKEY",
            "ApiKey",
            "api-key",
        ),
        re.compile(
            r"(?:[Ss]ecret|SECRET|[Tt]oken|TOKEN|[Aa]pi[_-]?[Kk]ey|API[_-]?KEY)[A-Za-z0-9_]*[\"']?\s*(?:=|:)\s*[\"']?"
            r"(?P<secret>(?!\[REDACTED)(?=[^\s\"',;&}]*[A-Za-z])(?=[^\s\"',;&}]*[0-9])"
            r"[^\s\"',;&}]{12,})"
        ),
    ),
)


def _replace(kind: str, text: str, pattern: re.Pattern[str]) -> tuple[str, int]:
    count = 0

    def sub(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        groups = match.groupdict()
        if groups.get("secret") is not None:
            start, end = match.span("secret")
            whole = match.group(0)
            offset = match.start()
            return whole[: start - offset] + REDACTED.format(kind=kind) + whole[end - offset :]
        return REDACTED.format(kind=kind)

    return pattern.sub(sub, text), count


# Families whose pattern starts with one of its literals: instead of letting the regex try
# every position of the text, it is matched only where ``str.find`` (C speed) found a literal
# (a lookbehind before the literal still sees the text before it). Not "aws_secret_key":
# its pattern is case-insensitive where its exact literals are not, so finding those alone
# (in a text whose lower-cased copy does not line up) could miss a match ``sub`` finds.
_AT_LITERALS = frozenset(kind for kind, _, _ in _PATTERNS if kind != "aws_secret_key")


def _literal_starts(text: str, kinds: set[str], present: frozenset[str]) -> dict[str, set[int]]:
    """Per ``_AT_LITERALS`` family in ``kinds``: every position where one of its literals
    starts, a superset of where its pattern can match (the pattern decides).

    The literals' case variants are found once each in the lower-cased text when it lines
    up with the text (every character lowers to one), else the exact literals in the text.
    ``present`` (the scan's case-insensitive hits) skips the variants that do not occur.
    The text is lower-cased one overlapping piece at a time: the whole lower-cased copy
    (as large as the summarizer input, four bytes a character once it holds an emoji) is
    never held.
    """
    families = [k for k in _AT_LITERALS_ORDER if k in kinds]
    wanted = {k: tuple(x for x in _LOWER_NEEDLES[k] if x in present) for k in families}
    found: dict[str, set[int]] = {k: set() for k in families}
    for base in range(0, max(len(text), 1), _LOWER_PIECE):
        piece = text[base : base + _LOWER_PIECE + _LONGEST_LITERAL - 1]
        lowered = piece.lower()
        if len(lowered) != len(piece):
            return _exact_starts(text, families)
        _find_into(found, lowered, wanted, base)
    return found


def _exact_starts(text: str, families: list[str]) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {k: set() for k in families}
    _find_into(found, text, {k: _LITERALS[k] for k in families}, 0)
    return found


def _find_into(
    found: dict[str, set[int]], where: str, needles: dict[str, tuple[str, ...]], base: int
) -> None:
    for kind, literals in needles.items():
        starts = found[kind]
        for literal in literals:
            at = where.find(literal)
            while at != -1:
                starts.add(base + at)
                at = where.find(literal, at + 1)


def _replace_at_literals(
    kind: str, text: str, pattern: re.Pattern[str], starts: set[int]
) -> tuple[str, int]:
    pieces: list[str] = []
    done = 0
    count = 0
    for at in sorted(starts):
        if at < done:
            continue
        match = pattern.match(text, at)
        if match is None:
            continue
        count += 1
        if match.groupdict().get("secret") is not None:
            start, end = match.span("secret")
        else:
            start, end = match.span()
        pieces.append(text[done:start])
        pieces.append(REDACTED.format(kind=kind))
        done = end
    if not count:
        return text, 0
    pieces.append(text[done:])
    return "".join(pieces), count


_AT_LITERALS_ORDER = tuple(kind for kind, _, _ in _PATTERNS if kind in _AT_LITERALS)
_LITERALS = {kind: literals for kind, literals, _ in _PATTERNS}
_LOWER_NEEDLES: dict[str, tuple[str, ...]] = {
    kind: tuple(dict.fromkeys(x.lower() for x in literals))
    for kind, literals, _ in _PATTERNS
    if kind in _AT_LITERALS
}


def _literal_scan() -> tuple[Any, tuple[tuple[str, str | None], ...]]:
    """The RE2 set over every family's literals, and per set entry ``(kind, needle)``:
    needle None for an exact literal (the family's gate), else the lower-case needle a
    ``_AT_LITERALS`` family looks for in the lower-cased text, matched case-insensitively.

    RE2's case folding of an ASCII letter covers every character ``str.lower`` maps to it
    (the letter's other case and the Kelvin sign), so a needle the lower-cased text holds is
    always reported; the scan only saves the ``find`` of needles that are absent.
    """
    scan = re2.Set.SearchSet()
    entries: list[tuple[str, str | None]] = []
    for kind, literals, _ in _PATTERNS:
        for literal in dict.fromkeys(literals):
            scan.Add(re2.escape(literal))
            entries.append((kind, None))
        for needle in _LOWER_NEEDLES.get(kind, ()):
            scan.Add("(?i)" + re2.escape(needle))
            entries.append((kind, needle))
    scan.Compile()
    return scan, tuple(entries)


_SCAN, _ENTRIES = _literal_scan()
# The scan reads the text in pieces this long, each overlapping the next by the longest
# literal less one char, so every occurrence lies whole in some piece; only a piece is held
# as UTF-8 at a time (the whole summarizer input was: its size again, three times over for
# the non-ASCII text of code listings).
_SCAN_PIECE = 65_536
# Literals are found in lower-cased pieces of this length: a piece of a text holding one
# emoji is four bytes a character, and ``str.lower`` of non-ASCII text takes a scratch
# buffer of 12 bytes a character (64K pieces: 1 MB above the text).
_LOWER_PIECE = 16_384
_LONGEST_LITERAL = max(
    [len(x) for _, literals, _ in _PATTERNS for x in literals]
    + [len(x) for needles in _LOWER_NEEDLES.values() for x in needles]
)


def _present(text: str) -> tuple[set[str], frozenset[str]]:
    """``(families with one of their exact literals in text, lower-case needles found)``,
    from one scan of the text."""
    kinds: set[str] = set()
    needles: set[str] = set()
    for start in range(0, max(len(text), 1), _SCAN_PIECE):
        piece = text[start : start + _SCAN_PIECE + _LONGEST_LITERAL - 1]
        # surrogatepass: a lone surrogate (valid in JSON-decoded text) must not stop the
        # scan; the literals are ASCII, and so unaffected.
        hits: list[int] | None = _SCAN.Match(piece.encode("utf-8", "surrogatepass"))
        for index in hits or ():
            kind, needle = _ENTRIES[index]
            if needle is None:
                kinds.add(kind)
            else:
                needles.add(needle)
    return kinds, frozenset(needles)


def redact(text: str) -> tuple[str, int]:
    """``(text with secrets replaced, number of secrets replaced)``."""
    kinds, needles = _present(text)
    if not kinds:
        return text, 0
    total = 0
    starts: dict[str, set[int]] | None = None
    for kind, _, pattern in _PATTERNS:
        if kind not in kinds:
            continue
        if kind in _AT_LITERALS:
            if starts is None:  # for every family still to run, in one walk
                starts = _literal_starts(text, kinds, needles)
            text, count = _replace_at_literals(kind, text, pattern, starts[kind])
        else:
            text, count = _replace(kind, text, pattern)
        if count:
            # The next families are gated on the text as replaced so far (positions moved).
            kinds, needles = _present(text)
            starts = None
            total += count
    return text, total

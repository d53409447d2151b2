"""Secret redaction for the summarizer input and the deterministic summary (hermes profile).

One module holds every pattern: provider API keys (OpenAI, Anthropic, OpenRouter, Google,
GitHub, GitLab, Slack, Stripe, Hugging Face, Groq, xAI), bearer tokens, JWTs, AWS access
keys and secret keys, PEM private-key blocks, ``password=``/``secret:``/``token=``
assignments, and URLs with credentials. Matches become ``[REDACTED:<kind>]``.

Cheap by construction: every pattern is anchored on a literal that a C-level ``in``/``find``
check looks for first (``"sk-"``, ``"eyJ"``, ``"AKIA"``, ``"-----BEGIN"``, ``"://"`` …), so a
text without any of them is never run through a regex at all, and the patterns that do run
are one alternation per family rather than one pass per key shape. Hermes spends most of its
compaction time in redaction (reference §14: 72–81 %); the bench prints our share.
"""

from __future__ import annotations

import re

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
# every position of the text, it is matched only where ``str.find`` (C speed) found a literal.
_AT_LITERALS = frozenset({"password", "secret", "url_credentials", "bearer_token"})


def _replace_at_literals(
    kind: str, text: str, literals: tuple[str, ...], pattern: re.Pattern[str], lowered: str
) -> tuple[str, int]:
    # The literals' case variants are found once each in the lower-cased text (when it
    # lines up with the text), a superset of where they start: the pattern decides.
    where, needles = (
        (lowered, tuple(dict.fromkeys(x.lower() for x in literals)))
        if len(lowered) == len(text)
        else (text, literals)
    )
    starts: set[int] = set()
    for literal in needles:
        at = where.find(literal)
        while at != -1:
            starts.add(at)
            at = where.find(literal, at + 1)
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


# A coarser, lower-case anchor set per family, checked first on the lower-cased text: each
# family's literals all contain one of its anchors (case aside), so a family whose anchors
# are absent has none of its literals either. 22 scans instead of 55 (at 1k messages the
# literal checks were most of the redaction time); the exact literals are checked only
# for the families that pass.
_ANCHORS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----begin",),
    "api_key": ("sk-", "k_", "gh", "github", "glpat-", "xox", "hf_", "xai-", "aiza"),
    "aws_access_key": ("akia", "asia"),
    "jwt": ("eyj",),
    "bearer_token": ("bearer ",),
    "url_credentials": ("://",),
    "aws_secret_key": ("aws_secret", "secretaccesskey"),
    "password": ("passw", "pwd"),
    "secret": ("secret", "token", "api"),
}


def redact(text: str) -> tuple[str, int]:
    """``(text with secrets replaced, number of secrets replaced)``."""
    total = 0
    lowered = text.lower()
    for kind, literals, pattern in _PATTERNS:
        if not any(anchor in lowered for anchor in _ANCHORS[kind]):
            continue
        if not any(literal in text for literal in literals):
            continue
        if kind in _AT_LITERALS:
            text, count = _replace_at_literals(kind, text, literals, pattern, lowered)
            if count:
                lowered = text.lower()
        else:
            text, count = _replace(kind, text, pattern)
            if count:
                lowered = text.lower()
        total += count
    return text, total

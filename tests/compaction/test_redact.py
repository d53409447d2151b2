"""Secret redaction: real key shapes, no false positives on ordinary agent text, and the
engine's summarizer input and deterministic summary never carry them."""

from __future__ import annotations

import json
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact
from compaction import redact as redact_module
from compaction.redact import redact
from tests.compaction.builders import WORDS, assistant, call, result, system, user

# Shapes of real credentials (documented example values or random strings of the same form).
SECRETS = {
    "openai": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd",
    "anthropic": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-ABCDEFG",
    "openrouter": "sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-1234567890-abcdefghij",
    "huggingface": "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "google": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "stripe": "sk_live_abcdefghijklmnop1234",
    "aws_access": "AKIAIOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_provider_keys_are_redacted(name):
    text, count = redact(f"use {SECRETS[name]} here")
    assert SECRETS[name] not in text
    assert count == 1
    assert text.startswith("use [REDACTED:")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "Authorization: Bearer abcdef0123456789abcdef0123456789",
            "abcdef0123456789abcdef0123456789",
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        ("DB_PASSWORD=hunter22", "hunter22"),
        ('{"password": "swordfish"}', "swordfish"),
        ("postgres://admin:s3cretpw@db.example.com:5432/app", "s3cretpw"),
        ("GITLAB=glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXk",
        ),
    ],
)
def test_tokens_passwords_keys_and_url_credentials_are_redacted(text, secret):
    out, count = redact(text)
    assert secret not in out
    assert count == 1


@pytest.mark.parametrize(
    "text",
    [
        "tokens: 500, token_count=123, max_tokens=4096, the secret is out",
        "https://example.com/path?x=1 and git@github.com:owner/repo.git",
        "def password_reset(user): return None",
        "sk-learn is a library; ghp is short",
        "the error was null",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == (text, 0)


def test_the_summarizer_input_and_the_summary_never_carry_a_secret():
    key = SECRETS["openai"]
    messages = [system(), user(f"my key is {key}, never print it")]
    for i in range(8):
        messages.append(user(f"step {i} " + "word " * 30))
        messages.append(assistant(None, call(f"t{i}", "terminal", command=f"env | grep KEY {i}")))
        messages.append(
            result(f"t{i}", json.dumps({"output": f"OPENAI_API_KEY={key}\n", "exit_code": 0}))
        )
        messages.append(assistant("checked " + "word " * 30))
    out = compact(
        messages,
        config=CompactionConfig(tail_token_budget=200),
        now=date(2026, 1, 1),
        tokenizer=WORDS,
        force=True,
    )
    report = out.report.to_dict()
    assert key not in report["summarizer_input"]
    assert key not in report["summary_body"]
    assert report["redactions"] >= 2
    classic = compact(
        messages,
        config=CompactionConfig(profile="classic", tail_token_budget=200),
        now=date(2026, 1, 1),
        tokenizer=WORDS,
        force=True,
    ).report.to_dict()
    assert classic["redactions"] == 0


def _reference_redact(text: str) -> tuple[str, int]:
    """The plain algorithm the one-scan gate must reproduce: each family in order, gated on
    its exact literals in the text as replaced so far; literal-anchored families matched at
    every start of a lower-cased literal."""
    total = 0
    for kind, literals, pattern in redact_module._PATTERNS:
        if not any(literal in text for literal in literals):
            continue
        if kind in redact_module._AT_LITERALS:
            lowered = text.lower()
            where, needles = (
                (lowered, tuple(dict.fromkeys(x.lower() for x in literals)))
                if len(lowered) == len(text)
                else (text, literals)
            )
            starts = {
                at for needle in needles for at in range(len(where)) if where.startswith(needle, at)
            }
            pieces, done, count = [], 0, 0
            for at in sorted(starts):
                match = pattern.match(text, at) if at >= done else None
                if match is None:
                    continue
                count += 1
                span = match.span("secret") if match.groupdict().get("secret") else match.span()
                pieces += [text[done : span[0]], redact_module.REDACTED.format(kind=kind)]
                done = span[1]
            if count:
                text = "".join([*pieces, text[done:]])
        else:
            text, count = redact_module._replace(kind, text, pattern)
        total += count
    return text, total


_FRAGMENTS = [
    *SECRETS.values(),
    "Bearer abcdef0123456789abcdef0123456789",
    "BEARER xyz",
    "postgres://admin:s3cretpw@db.example.com:5432/app",
    "https://example.com/x",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "DB_PASSWORD=hunter22",
    '{"password": "swordfish"}',
    "PassWord: abcd1234",
    "pwd=",
    "secretoken=abc123def456ghi",
    "SECRET_KEY=0123456789abcdefXYZ",
    "apiKey: 0123456789abcdefXYZ",
    "Api-Key=abcdef0123456789",
    "TOKEN = tok_0123456789abcdef",
    "tokens: 500",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "[REDACTED:secret]",
    "\u212a",  # Kelvin sign: lower-cases to "k"
    "\u0130",  # dotted capital I: lower-cases to two characters
    "\u017f",  # long s: RE2 folds it with "s", str.lower does not
    "\ud800",  # a lone surrogate (valid in JSON-decoded text)
    "é—⟪",
    " ",
    "\n",
    "=",
    ":",
    "0123456789abcdef",
    "sk-",
    "sk_",
    "k",
    "token",
    "api",
    "_key",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))
def test_the_one_scan_gate_redacts_like_the_plain_algorithm(parts):
    text = "".join(parts)
    assert redact(text) == _reference_redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "s3cr3t \ud800 password=hunter22",
        "\u0130 api_key=0123456789abcdefXYZ",
        "\u212aey: api\u212aey=0123456789abcdefXYZ",
        "APIKEY=0123456789abcdefXYZ and apikey=0123456789abcdefXYZ",
    ],
)
def test_unusual_characters_redact_like_the_plain_algorithm(text):
    assert redact(text) == _reference_redact(text)

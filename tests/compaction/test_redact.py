"""Secret redaction: real key shapes, no false positives on ordinary agent text, and the
engine's summarizer input and deterministic summary never carry them."""

from __future__ import annotations

import json
from datetime import date

import pytest

from compaction import CompactionConfig, compact
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

"""The summarizer prompt is built only when a summarizer reads it, and then once."""

from __future__ import annotations

from typing import Any

import pytest

import compaction.engine as engine
from compaction import CompactionConfig, compact, generate_conversation
from compaction.summarizer import SummaryOutcome, SummaryRequest


@pytest.fixture
def prompts_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    real = engine.build_prompt

    def counting(*args: Any, **kwargs: Any) -> str:
        prompt = real(*args, **kwargs)
        built.append(len(prompt))
        return prompt

    monkeypatch.setattr(engine, "build_prompt", counting)
    return built


class _ReadsThePromptTwice:
    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        assert request.prompt is request.prompt  # the same string, not a second build
        return SummaryOutcome("## Goal\nship it", "aux", "stub", request.prompt)


def test_the_deterministic_summary_never_builds_the_prompt(prompts_built: list[int]) -> None:
    result = compact(generate_conversation(300, seed=3), config=CompactionConfig(), force=True)
    assert result.status == "compacted"
    assert prompts_built == []  # it would hold the whole serialized middle a second time
    assert result.report.summarizer_prompt is None


def test_a_summarizer_that_reads_the_prompt_gets_it_built_once(prompts_built: list[int]) -> None:
    result = compact(
        generate_conversation(300, seed=3),
        config=CompactionConfig(),
        summarizer=_ReadsThePromptTwice(),
        force=True,
    )
    assert result.status == "compacted"
    assert len(prompts_built) == 1
    prompt = result.report.summarizer_prompt
    assert prompt is not None
    assert len(prompt) == prompts_built[0]
    assert result.report.summarizer_input in prompt


def test_the_summary_memo_never_holds_the_system_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    # The summary is counted line by line with a memo of its lines (it is counted many times
    # while the ledger is fitted); the system prompt with the compaction note is another new
    # row: counted through the memo it would keep a copy of every line of a long prompt.
    seen: list[str] = []
    real = engine.piecewise_counter

    def recording(model: str) -> Any:
        count = real(model)

        def counted(text: str) -> int:
            seen.append(text)
            return count(text)

        return counted

    monkeypatch.setattr(engine, "piecewise_counter", recording)
    messages = generate_conversation(300, seed=3)
    system_prompt = "You are a careful agent. Rule 41: never push to main.\n" * 400
    messages[0] = {"role": "system", "content": system_prompt}
    result = compact(messages, config=CompactionConfig(), force=True)
    assert result.status == "compacted"
    assert result.messages[0]["content"].startswith(system_prompt)  # the note was appended
    assert seen  # the summary was counted through it
    assert not any("Rule 41" in text for text in seen)

"""A request that rebuilds its history (aider) finds the rotation it starts with by one
indexed lookup, not by reading and hashing stored sessions; another user's runs stay out."""

import json

import openai
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction import PREFIX_OPENING
from hermes_web.models import ApiKey, Compaction
from hermes_web.openai_compat import service
from hermes_web.openai_compat.validation import request_from
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.test_v1_rebuilt_history import FILES, SYSTEM
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)


def _aider_history(live_server, owner, upstream) -> tuple[list[dict], Compaction]:
    """Ten rebuilt-history requests of one owner, then its compaction, committed."""
    sdk = openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(owner), max_retries=0, timeout=30
    )
    done: list[dict] = []
    for number in range(10):
        cur = {"role": "user", "content": f"Step {number}: go on."}
        upstream.enqueue(
            {
                "content": file_text(f"step {number}", MIDDLE_MARKER if number == 2 else ""),
                "prompt_tokens": 2_000 + 7_000 * number,
            }
        )
        reply = sdk.chat.completions.create(
            model="fake-chat", messages=[SYSTEM, *done, *FILES, cur]
        )
        done += [cur, {"role": "assistant", "content": reply.choices[0].message.content}]
    run = run_compaction(Compaction.objects.get(session__owner=owner).pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    return done, run


def _prepare(owner, messages: list[dict], key: ApiKey | None = None) -> service.Prepared:
    key = key or ApiKey.objects.get(owner=owner)
    return service.prepare(key, request_from({"model": "fake-chat", "messages": messages}))


def test_the_replaced_prefix_is_found_in_a_bounded_number_of_queries(
    live_server, alice, bob, upstream
):
    done, run = _aider_history(live_server, alice, upstream)
    ApiKey.issue(owner=bob, name="agent")
    question = [SYSTEM, *done, *FILES, {"role": "user", "content": "Which step batched most?"}]
    first = _prepare(alice, question)  # (indexes the run: it was committed before any lookup)
    assert first.compaction == run

    key = ApiKey.objects.get(owner=alice)
    with CaptureQueriesContext(connection) as queries:
        prepared = _prepare(alice, question, key)
    # The session lookup, the indexed candidates, the chosen run's rows: no stored session
    # is read and hashed to be compared.
    assert len(queries) <= 3, [q["sql"] for q in queries]
    assert prepared.compaction == run
    sent = json.dumps(prepared.upstream_messages, ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert MIDDLE_MARKER not in sent
    assert prepared.upstream_messages[-3:] == question[-3:]
    assert prepared.upstream_messages == first.upstream_messages

    # Bob sends the very same history with his own key: Alice's compaction stays hers.
    theirs = _prepare(bob, question)
    assert theirs.compaction is None
    assert theirs.upstream_messages == question


def test_a_run_committed_before_the_index_is_indexed_once(live_server, alice, upstream):
    done, run = _aider_history(live_server, alice, upstream)
    Compaction.objects.filter(pk=run.pk).update(replaced_hashes=None, replaced_prefix_hash="")
    question = [SYSTEM, *done, *FILES, {"role": "user", "content": "And then?"}]
    assert _prepare(alice, question).compaction == run
    run.refresh_from_db()
    assert run.replaced_prefix_hash
    assert run.replaced_hashes
    assert _prepare(alice, [SYSTEM, {"role": "user", "content": "new"}]).compaction is None

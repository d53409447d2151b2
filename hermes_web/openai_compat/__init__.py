"""An OpenAI-compatible chat endpoint in front of any agent, with server-side compaction.

A client points its OpenAI SDK at ``<site>/v1`` with one of our API keys and keeps sending
its whole history. Each request is matched to a stored session (``X-Hermes-Session`` or the
hash of the message prefix, per key); once that session has a committed compaction, the
model receives the compacted context (head + summary + tail) plus what the client added
since. New messages and the reply are stored, the provider's ``usage.prompt_tokens`` is
recorded, and crossing the threshold queues a background compaction as the chat does.

Modules: ``errors`` (OpenAI-shaped errors), ``validation`` (the request body),
``matching`` (conversation identity), ``upstream`` (the litellm call), ``service`` (what a
request does, from identity to storage) and ``views`` (HTTP and SSE).
"""

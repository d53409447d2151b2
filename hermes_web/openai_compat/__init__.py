"""Model endpoints in front of any agent, with server-side compaction: OpenAI chat
completions, OpenAI Responses and Anthropic Messages, one conversation service behind them.

A client points its OpenAI SDK at ``<site>/v1`` with one of our API keys and keeps sending
its whole history. Each request is matched to a stored session (``X-Hermes-Session`` or the
hash of the message prefix, per key); once that session has a committed compaction, the
model receives the compacted context (head + summary + tail) plus what the client added
since. New messages and the reply are stored, the provider's ``usage.prompt_tokens`` is
recorded, and crossing the threshold queues a background compaction as the chat does.

Modules: ``errors`` (each protocol's error shape), ``validation`` (the chat request body),
``matching`` (conversation identity, canonical forms), ``upstream`` (the litellm call),
``service`` (what a request does, from identity to storage), ``views`` (HTTP and SSE of chat
completions, and ``serve``, the request flow every protocol shares), ``anthropic`` (the
Messages adapter) and ``responses`` (the Responses adapter).
"""

"""Presenters: stored rows and reports reshaped into what a page prints, one module per family.

``messages`` (one message: text, images, tool calls, JSON fields, word diff), ``chat`` (chat
items with safe Markdown, the sidebar's chains, a compaction's outcome in words),
``inspector`` (split, token strip, slimming page, summary), ``compare`` (message fates),
``facts`` (the fact-survival audit), ``lineage`` (charts), ``vocabulary`` (the words for stored
values and report warnings). Views call a service or a presenter and render the result; the
templates only print (always escaped).
"""

"""Flows that cross boundaries (database → engine → database → task).

``sessions`` writes conversations; ``compactions`` queues, runs and commits compaction runs.
Views, the API, tasks and commands call these; nothing else writes Message rows.
"""

"""Flows that cross boundaries (database → engine → database → task).

``sessions`` writes conversations; ``compactions`` requests and queues compaction runs (and
re-exports the rest), ``compaction_run`` runs one, ``compaction_commit`` commits its result;
``leases`` holds a session for one run; ``undo``, ``recall``, ``dbretry`` as named;
``search`` searches what a user stored, on the index ``search_index`` keeps.
Views, the API, tasks and commands call these; nothing else writes Message rows.
"""

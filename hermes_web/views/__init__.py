"""Views, one module per area: accounts, conversations, chat, imports, api_keys, and the
inspector's compactions, what_if, lineage and compare."""

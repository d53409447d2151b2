"""Views, one module per area: accounts, conversations (inspector), chat, imports, settings."""

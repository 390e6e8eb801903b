"""The arena on the web: its read model and the read-only JSON API (issue 13)."""

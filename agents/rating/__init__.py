"""Rating agents: a model rates every offered symbol, and a documented rule turns the ratings
into target weights that are traded like any agent's (`report`, `agent`)."""

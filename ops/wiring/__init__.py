"""Wiring: a run built from the config (planning), the agent builders, the sandbox applied, the
demo, seeds, recorded answers and the replay's checks."""

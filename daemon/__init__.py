"""Daemon: the clock, the cycle runner, the scheduler and the process lifecycle."""

"""Strategy-code agents (FIDES' dual delivery): a model writes a `strategy(bars)` function and a
claimed edge; the code is checked for look-ahead and I/O, then run in a sandboxed subprocess every
cycle."""

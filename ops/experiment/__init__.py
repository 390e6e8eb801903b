"""`openbell experiment`: a grid of LLM models x prompts x decision modes x seeds run as one
replay on identical data, and the paired differences between its variants (`grid` expands the
config, `paired` computes the differences, `measure` replays and reads the ledger back, `output`
prints)."""

"""The built-in LLM agent: an OpenAI-compatible chat-completions client, provider-quirk parsing,
the tool-calling loop with budgets and traces, and the seams (prompt builders, maskers) that the
decision modes and masking levels plug into."""

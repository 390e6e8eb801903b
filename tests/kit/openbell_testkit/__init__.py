"""The test kit: builders with defaults and fakes at the boundaries, shared by the test tiers.

One module per thing built: `store` (instruments, orders, fills, table dumps), `agents` (an arena
of ledger, replay data, gateway and broker), `llm` (a scripted OpenAI-compatible model), `modes`
(one scripted LLM cycle), `live` (the live daemon on a fake clock), `reports` (a hand-built ledger
with known NAVs), `postgres` (the test server's schemas and fault injection), `offline` (refusing
the network), `yahoo` (a fake Yahoo over recorded payloads), `secrets` (a secret scanner), `cli`
(the real CLI in a subprocess), `jail` (whether the OS sandbox runs here; processes left behind).
"""

"""`openbell fake-llm`: a fake OpenAI-compatible model on loopback, for trying the LLM path (and
the tutorials) with no key and no network.

It serves `ops.wiring.fake_llm.FakeModel` (scripted turns from `--script FILE`, else seeded random
tool calls from `--seed`) on `--host`:`--port` until SIGINT or SIGTERM (exit 0), and prints the
`base_url` to configure first, on one line of stdout. Like `run` and `serve`, it keeps both signals
caught (`app.py`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from openbell.ops.cli.options import state

#: The default `--port` (the daemon's default is 8787).
DEFAULT_PORT = 8790
#: How often the serving loop looks at the stop request, in seconds.
POLL_S = 0.1


def fake_llm_command(
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Port to serve on (0: any free port)."),
    ] = DEFAULT_PORT,
    host: Annotated[
        str, typer.Option("--host", help="Address to serve on (loopback by default).")
    ] = "127.0.0.1",
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the random tool calls (without --script).")
    ] = 0,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            help='A JSON file of turns every cycle plays in order: [{"tool_calls": [{"name": '
            '"get_quote", "arguments": {"symbols": ["BTC/USDT"]}}]}, {"content": "..."}, ...]; '
            "past its end the model calls finish.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve a fake OpenAI-compatible chat-completions model (tool calls included) until Ctrl-C.

    Point an LLM agent at it with base_url = "http://127.0.0.1:8790/v1" (any model name, no
    api_key_env needed). Without --script each cycle quotes a few symbols of the agent's universe,
    then buys one at a small weight, sells a holding or holds, then finishes: drawn from --seed and
    the cycle's prompt, so the same replay trades the same way again.
    """
    from openbell.ops.wiring.fake_llm import FakeModel, FakeScript, serve_fake_model

    model = FakeModel(seed=seed, script=None if script is None else FakeScript.read(script))
    server = serve_fake_model(model, host, port)
    shown = f"script {script}" if script is not None else f"seed {seed}"
    typer.echo(f"fake-llm serving {server.url} ({shown}); Ctrl-C stops it", color=False)
    sys.stdout.flush()
    try:
        while not state.stop.is_set():
            time.sleep(POLL_S)
    finally:
        server.close()

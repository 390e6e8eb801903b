"""The `openbell` command line: the entry point that wires config, logging, store and daemon.

This package owns the command surface (`init`, `config check`, `db upgrade`, `ledger verify`,
`run`, `cycle`, `serve`, `leaderboard`, `report`, `export`, `demo`, `replay`, `data import`,
`trace`, `judge`, `positions`, `agent token`, `season open|close|list|card|export|verify`), the
global options (`--config`, `--log-format`, `--version`, and the hidden `--fake-clock` for
tests; `-h` is `--help` on every command) and the exit-code contract: 0 success, 1 a ledger
breach (or `init` refusing to overwrite, `judge` leaving a strategy unjudged or its judge
unreachable, or an unexpected failure),
2 anything an operator must fix (bad config, bad input, schema drift, unreachable database), 130
interrupted.
Every error is one line on stderr, `openbell: error: ...`, never a traceback (a config file with
several problems gets one such line per problem). One-shot commands print their result on stdout and
log to stderr; `run` logs JSON lines on stdout for journald. While a command runs, stdout and stderr
go through `secrets.MaskedStream`: once the config is loaded, no configured secret can be printed,
in any form.

SIGINT and SIGTERM are caught from the first moment (`entry.py`, `daemon.stopping`). Every command
but `run` and `serve` gets their launch dispositions back once the command is known (Ctrl-C
interrupts it, 130).

`app.py` builds the app and runs it (`main`); one module per command group holds its commands
(`config_file`, `database`, `daemon`, `serve`, `reports`, `history`, `trace`, `judge`,
`positions`, `tokens`, `seasons`), and `options.py` what they share. A command imports what it
runs on when it runs, so that `openbell --help`, and every command, pays only for its own imports.
"""

from __future__ import annotations

from openbell.ops.cli.app import app, main

__all__ = ["app", "main"]

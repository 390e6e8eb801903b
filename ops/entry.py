"""The `openbell` console script: it catches a stop before the command line's imports.

Importing the command line, and then what a command runs on (pandas, SQLAlchemy, the vendor
adapters, imported by the command when it runs), takes time; a SIGINT or SIGTERM in that time must
be neither lost nor fatal mid-way. So this module imports only `openbell.daemon.stopping`, records
both signals in a `StopRequest` first, and only then imports `openbell.ops.cli`, whose `main`
decides what the request means for the command run.

It also turns the cyclic garbage collector off before those imports: building thousands of
classes and functions triggers hundreds of collections that find nothing to free (about 0.3 s of
`openbell leaderboard`'s ~1.8 s). A command that reads the ledger and exits keeps it off; every
other command turns it back on once it is known (`ops.cli.app.QUICK_COMMANDS`).
"""

from __future__ import annotations

import gc
import sys

from openbell.daemon.stopping import StopRequest


def main() -> int:
    """Run the `openbell` command line (sys.argv) with SIGINT and SIGTERM caught from the start."""
    stop = StopRequest()
    stop.catch_signals()
    gc.disable()  # until the command is known: see the module docstring
    from openbell.ops.cli import main as cli_main  # only now that the signals are caught

    return cli_main(stop=stop)


if __name__ == "__main__":
    sys.exit(main())

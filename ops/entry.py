"""The `openbell` console script: it catches a stop before the command line's imports.

Importing the command line, and then what a command runs on (pandas, SQLAlchemy, the vendor
adapters, imported by the command when it runs), takes time; a SIGINT or SIGTERM in that time must
be neither lost nor fatal mid-way. So this module imports only `openbell.daemon.stopping`, records
both signals in a `StopRequest` first, and only then imports `openbell.ops.cli`, whose `main`
decides what the request means for the command run.
"""

from __future__ import annotations

import sys

from openbell.daemon.stopping import StopRequest


def main() -> int:
    """Run the `openbell` command line (sys.argv) with SIGINT and SIGTERM caught from the start."""
    stop = StopRequest()
    stop.catch_signals()
    from openbell.ops.cli import main as cli_main  # only now that the signals are caught

    return cli_main(stop=stop)


if __name__ == "__main__":
    sys.exit(main())

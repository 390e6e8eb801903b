"""`python -m openbell.ops.cli`: the command line, with SIGINT and SIGTERM caught from `main` on."""

from __future__ import annotations

import sys

from openbell.ops.cli.app import main

sys.exit(main())

"""`python -m mrtr`: the `mrtr` command."""

from __future__ import annotations

import sys

from mrtr.cli import main

sys.exit(main())

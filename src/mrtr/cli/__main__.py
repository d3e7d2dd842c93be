"""`python -m mrtr.cli`."""

from __future__ import annotations

import sys

from mrtr.cli import main

sys.exit(main())

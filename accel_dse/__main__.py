"""``python -m accel_dse`` runs the CLI."""

from __future__ import annotations

import sys

from accel_dse.cli import main

sys.exit(main())

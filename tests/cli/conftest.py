"""Fixtures of the hostile-input tests: the helpers of hostile_testlib importable."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

REPORT_TESTS = HERE.parent / "report"
if str(REPORT_TESTS) not in sys.path:
    sys.path.insert(0, str(REPORT_TESTS))

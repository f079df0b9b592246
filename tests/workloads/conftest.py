"""Make ``import workloads`` find the package, not this test folder of the same name.

``tests/`` is on ``sys.path`` (rootdir conftest without ``__init__.py``), so ``tests/workloads``
would be imported as a namespace package named ``workloads`` when pytest is started as
``.venv/bin/pytest`` (``python -m pytest`` puts the repo first and is unaffected).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [REPO]:
    sys.path.insert(0, REPO)
_cached = sys.modules.get("workloads")
if _cached is not None and getattr(_cached, "__file__", None) is None:  # the namespace stand-in
    del sys.modules["workloads"]

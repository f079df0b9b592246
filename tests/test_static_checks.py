"""The whole tree is ruff-clean and mypy-clean (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    found = str(path) if path.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: scripts/setup.sh installs the dev extras")
    return found


def test_ruff_clean():
    proc = subprocess.run([_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_clean():
    # The packages listed under [tool.mypy] files; no cache in the tree.
    proc = subprocess.run([_tool("mypy"), "--no-incremental", "--cache-dir", "/dev/null"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr

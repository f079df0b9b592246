#!/usr/bin/env bash
# Set up (scripts/setup.sh, with the PostgreSQL server) and run the whole test suite on every core
# (pytest-xdist; work stealing evens out the long simulator tests; simulator builds are shared through
# the build cache, keyed by the Verilog's hash and locked, so each design builds once per machine).
# Extra arguments go to pytest (`-n 0` runs serially).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_POSTGRES=1 bash scripts/setup.sh
# Bytecode is written (__pycache__, git-ignored) even where the environment sets PYTHONDONTWRITEBYTECODE: else
# every CLI, sweep-worker and simulator subprocess compiles the project's modules again (~0.5 CPU-s each).
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n auto --dist worksteal "$@"

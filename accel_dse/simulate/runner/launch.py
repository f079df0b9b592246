"""Run a cocotb test module against a cached build, in its own process group, with a timeout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from accel_dse.simulate.runner.build import Build, clean_env, verilator_fst
from accel_dse.simulate.runner.process import ProcessOutcome, run_in_group

__all__ = ["run_testbench", "waves_file"]


def waves_file(build: Build, run_dir: Path) -> Path:
    """Where a traced run in ``run_dir`` writes its waveform: FST (Verilator: cocotb's harness's name,
    a VCD where Verilator's FST writer cannot compile: :func:`runner.build.verilator_fst`)."""
    if build.simulator.name == "icarus":
        return run_dir / "waves.fst"
    return run_dir / ("dump.fst" if verilator_fst() else "dump.vcd")


def run_testbench(
    build: Build,
    *,
    test_module: str,
    run_dir: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    python_path: Sequence[str] = (),
    poll: Callable[[], None] | None = None,
    waves: bool = False,
    waves_args: Sequence[str] = (),
) -> ProcessOutcome:
    """Run cocotb ``test_module`` on ``build``; the simulator's output goes to ``run_dir/sim.log``.

    Args:
        build: A build from :func:`accel_dse.simulate.build_design`.
        test_module: Importable name of the cocotb test module.
        run_dir: Directory to run in (created); gets ``sim.log``, ``launcher.log``, ``results.xml``.
        env: Extra environment variables for the simulator process (the testbench's inputs).
        timeout: Seconds before the whole process group is killed; ``None`` for no limit.
        python_path: Directories to put in front of ``sys.path`` (for test modules outside packages).
        poll: Called about once a second while the simulation runs (for progress reports).
        waves: Trace the run into :func:`waves_file` (the build must be a ``waves`` build).
        waves_args: Icarus: the window's plusargs (``accel_dse.simulate.waves.window_plusargs``).

    Returns:
        How the launcher process ended (``timed_out`` after a kill). Whether the tests passed is
        for the caller to read from what the test module wrote.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    extra = {
        # cocotb would install pytest's assertion rewriting for every imported module (13 s for
        # jax); the testbench uses no assert statements, so rewrite nothing.
        "COCOTB_REWRITE_ASSERTION_FILES": "",
        **dict(env or {}),
    }
    spec = {
        "action": "test", "simulator": build.simulator.name, "top": build.top,
        "build_dir": str(build.directory), "test_dir": str(run_dir), "test_module": test_module,
        "extra_env": extra, "python_path": list(python_path), "log_file": str(run_dir / "sim.log"),
        "waves": waves,
        "plusargs": [f"+dumpfile_path={waves_file(build, run_dir)}", *waves_args]
        if waves and build.simulator.name == "icarus" else [],
    }
    spec_path = run_dir / "run_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2), "utf-8")
    process_env = build.simulator.environ(clean_env())
    process_env.update(extra)
    return run_in_group(
        [sys.executable, "-m", "accel_dse.simulate.runner.child", str(spec_path)],
        cwd=run_dir, env=process_env, log_path=run_dir / "launcher.log", timeout=timeout, poll=poll,
    )

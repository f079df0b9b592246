"""Expected duration of a simulation: the model's cycles over the simulator speed measured on the build.

A run records its speed (simulated cycles per wall second) in the build's folder
(``speed.json``); the next run of that build announces ``cycles / speed`` before it starts and,
while it runs, which op finished and the time left at that speed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["measured_speed", "record_speed", "expectation", "op_poll", "duration", "build_seconds", "build_line",
           "speed_estimate"]

#: Verilator cold build (ccache empty), seconds = base + per PE x PEs: fitted to TOOLCHAIN.md's
#: figures on 2 cores, 16x16 (256 PEs) ~75 s and 128x32 (4,096 PEs) ~5 min; a rebuild whose
#: modules are all in ccache takes ~0.3 s of compiling (plus linking).
VERILATOR_BASE_S, VERILATOR_PER_PE_S = 60.0, 0.059
#: Icarus compiles the Verilog only: 2.3 s measured for ``tiny`` (4x4) with its DRAM model; the
#: per-PE term is a guess that errs long (Icarus elaborates each PE).
ICARUS_BASE_S, ICARUS_PER_PE_S = 2.0, 0.02

#: Simulated cycles per wall second on an idle 2-core machine, ``speed = S * (P / PEs) ** E``, fitted
#: through two measured points per simulator (docs/simulate.md's tables): Verilator 275,700 cycles/s
#: at 16x16 and 10,500 at 128x32 (2026-12-04, idle); Icarus ~8,000 at 4x4 and ~115 at 16x16 (the
#: middles of its measured ranges). An estimate for a design no run has measured yet.
SPEED_FIT = {"verilator": (275_700.0, 256, 1.179), "icarus": (8_000.0, 16, 1.530)}

SPEED_FILE = "speed.json"


def duration(seconds: float) -> str:
    """``"45 s"``, ``"3.2 min"``, ``"1.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def build_seconds(simulator: str, pes: int) -> float:
    """Expected cold build time, seconds, of an array of ``pes`` PEs (see the constants above)."""
    if simulator == "verilator":
        return VERILATOR_BASE_S + VERILATOR_PER_PE_S * pes
    return ICARUS_BASE_S + ICARUS_PER_PE_S * pes


def speed_estimate(simulator: str, pes: int) -> float:
    """Simulated cycles per wall second expected for an array of ``pes`` PEs (:data:`SPEED_FIT`)."""
    speed, at, exponent = SPEED_FIT[simulator]
    return speed * (at / max(pes, 1)) ** exponent


def build_line(simulator: str, rows: int, cols: int) -> str:
    """One line said before a build starts: what is built and how long it takes."""
    seconds = build_seconds(simulator, rows * cols)
    cached = " (less where ccache holds its modules from an earlier build)" if simulator == "verilator" else ""
    return (f"{simulator} build of the {rows}x{cols} design, not in the cache: about {duration(seconds)} "
            f"on 2 cores{cached}")


def measured_speed(build_dir: Path) -> float | None:
    """Cycles per second measured on this build by an earlier run (``None``: none yet)."""
    try:
        speed = float(json.loads((Path(build_dir) / SPEED_FILE).read_text("utf-8"))["cycles_per_second"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return speed if speed > 0 else None


def record_speed(build_dir: Path, cycles: int, seconds: float) -> None:
    """Keep this run's speed for the next run's estimate (never fails the run)."""
    if cycles <= 0 or seconds <= 0:
        return
    try:
        (Path(build_dir) / SPEED_FILE).write_text(
            json.dumps({"cycles_per_second": cycles / seconds, "cycles": cycles, "seconds": seconds}), "utf-8")
    except OSError:
        pass


def expectation(cycles: int, speed: float | None, estimate: float | None = None) -> str:
    """One line: the cycles to simulate and how long that takes at the build's measured speed, or
    (none measured yet) at ``estimate`` cycles/s (:func:`speed_estimate`), said to be an estimate."""
    if speed is None:
        if estimate is None:
            return f"{cycles:,} cycles to simulate (no speed measured on this build yet: the first run measures it)"
        return (f"{cycles:,} cycles to simulate, about {duration(cycles / estimate)} at an estimated "
                f"{estimate:,.0f} cycles/s for the array's size (no speed measured on this build yet: the first "
                "run measures it)")
    return f"{cycles:,} cycles to simulate, about {duration(cycles / speed)} at {speed:,.0f} cycles/s (measured)"


def op_poll(names: Sequence[str], cycles: Sequence[int], done: Callable[[int], bool],
            say: Callable[[str], None]) -> Callable[[], None]:
    """A poll callback that says when each op has finished (``done(i)``), with the time left at
    the speed so far."""
    start = time.monotonic()
    total = max(1, sum(cycles))
    seen = 0

    def poll() -> None:
        nonlocal seen
        while seen < len(names) and done(seen):
            seen += 1
            elapsed = time.monotonic() - start
            finished = sum(cycles[:seen])
            left = ""
            if 0 < finished < total and elapsed > 0:
                left = f", about {duration((total - finished) * elapsed / finished)} left"
            say(f"finished op {seen}/{len(names)}: {names[seen - 1]} ({duration(elapsed)} so far{left})")

    return poll

"""CPU of one build of the SoC tests' Icarus testbench (``tests/rtl_gen/soc_icarus.py``): ``iverilog``
called directly (``soc_icarus._compiled``, what the tests use) against the product runner's
``build_design`` (a Python child process that drives cocotb's Icarus runner) on the same text.

Converts one small design's simulation top once (``--rows`` x ``--cols``, WS, double buffered), then
builds its testbench ``--repeat`` times each way, every build into a fresh directory (no cache hit),
and prints the CPU seconds of each (this process and its waited children, ``resource.getrusage``) and
the machine's load average. Nothing is asserted.

    PYTHONPATH=$PWD .venv/bin/python bench/soc_testbench_build.py
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests" / "rtl_gen"


def _cpu() -> float:
    """CPU seconds of this process and its waited children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--cols", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    import soc_icarus
    from system_testlib import small

    from accel_dse.simulate import find_simulator
    from accel_dse.simulate.runner.build import build_design

    with tempfile.TemporaryDirectory(prefix="soc-bench-") as tmp:
        _run(Path(tmp), args, soc_icarus, small, find_simulator, build_design)
    print(f"load average {os.getloadavg()[0]:.1f}")


def _run(tmp: Path, args: argparse.Namespace, soc_icarus: Any, small: Any, find_simulator: Any,
         build_design: Any) -> None:
    """Convert once, then build ``args.repeat`` times each way, each build in a fresh folder of ``tmp``."""
    soc_icarus.WORK_DIR = tmp / "work"
    texts: list[str] = []
    direct = soc_icarus._compiled
    soc_icarus._compiled = lambda text, work: (texts.append(text), direct(text, work))[1]
    start = _cpu()
    soc_icarus.build(small("ws", True, rows=args.rows, cols=args.cols), latency=7, words=4096)
    print(f"{args.rows}x{args.cols}: conversion + first build {_cpu() - start:.2f} CPU-s "
          f"(testbench text {len(texts[0]):,} chars)")
    for i in range(args.repeat):
        start = _cpu()
        direct(texts[0], tmp / f"direct{i}")
        mid = _cpu()
        build_design(texts[0], top=soc_icarus._TB, simulator=find_simulator("icarus"), work_dir=tmp / f"runner{i}")
        print(f"  iverilog directly {mid - start:.2f} CPU-s   product runner {_cpu() - mid:.2f} CPU-s")


if __name__ == "__main__":
    main()

"""CPU a design of the one-program figure (``network_figures``), cold, on random designs of a shipped space.

Draws ``--designs`` weight-stationary designs with square arrays from a space's grid (seeded;
``--dram unpaced`` keeps those whose DRAM keeps up with the bus, ``paced`` the others, ``any``
both), and times ``perf_model.compiler.network_figures`` on each workload, each design once, in a
fresh process (caches cold, as a sweep meets new designs). Prints ms of CPU a design and a checksum
of the totals (two checkouts giving one checksum give the same figures). ``--repo PATH`` imports
the model from another checkout: run it once per checkout, back to back, to compare. Nothing is
asserted: this prints figures, and the load average.

Run: ``.venv/bin/python bench/one_program_speed.py [--space edge-int8] [--designs 40] [--repo PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

_REPO = next((a.split("=", 1)[1] if "=" in a else sys.argv[i + 2] for i, a in enumerate(sys.argv[1:])
              if a.startswith("--repo")), str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(_REPO).resolve()))

import numpy as np  # noqa: E402

import workloads  # noqa: E402
from accel_dse.search.space.space_file import load_space  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402
from perf_model.compiler.network_figures import network_figures  # noqa: E402
from perf_model.program_timing import dram_rate  # noqa: E402


def _designs(space_name: str, count: int, dram: str, seed: int) -> list[ArrayConfig]:
    space = load_space(space_name)
    rng = np.random.default_rng(seed)
    size, out, tries = space.grid_size(), [], 0
    while len(out) < count and tries < 200 * count:
        tries += 1
        i = int(rng.integers(size))
        columns = space.grid_columns(i, i + 1)
        config = ArrayConfig(**{k: v[0].item() if hasattr(v[0], "item") else v[0] for k, v in columns.items()})
        paced = dram_rate(config) is not None
        if config.dataflow.value == "ws" and config.rows == config.cols and config.vector_unit and (
                dram == "any" or paced == (dram == "paced")):
            out.append(config)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="edge-int8", help="a shipped space")
    parser.add_argument("--designs", type=int, default=40, help="designs drawn")
    parser.add_argument("--dram", choices=("unpaced", "paced", "any"), default="unpaced")
    parser.add_argument("--workloads", default="resnet18,mobilenet_v2", help="comma-separated workload specs")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--repo", default=_REPO, help="checkout whose model is measured")
    args = parser.parse_args()
    designs = _designs(args.space, args.designs, args.dram, args.seed)
    print(f"model from {Path(_REPO).resolve()}; {len(designs)} {args.dram} WS designs of {args.space}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for name in args.workloads.split(","):
        wl = workloads.resolve(name)
        start, checksum, reasons = time.process_time(), 0, 0
        for config in designs:
            figures = network_figures(config, wl) or {}
            checksum += int(figures.get("total_cycles") or 0)
            reasons += "reason" in figures
        cpu = time.process_time() - start
        print(f"  {name:13s}: {1000 * cpu / max(1, len(designs)):8.1f} ms of CPU a design; checksum {checksum:,}; "
              f"{reasons} without one program", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

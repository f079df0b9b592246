"""Wall time of the grid sampler on a shipped space, one process against worker processes.

Scores ``--points`` contiguous grid points (the grid's own order, as its chunks run) at
``--blocks`` evenly spaced places of the space with ``grid_search`` (chunks of ``--chunk``), once
in this process and once with ``--workers`` spawned workers (their start-up included), and prints
designs per second of wall time and the hours a 10^6-design grid would take at that rate. Each
block starts cold in this process (the model's caches cleared), as a new sweep does. As a sweep
without ``--grid-table`` does, designs whose area breaks the space's area constraint are not scored;
``--table`` writes a table (to a temporary directory), so every design is. Nothing is asserted:
this prints figures.

Run: ``.venv/bin/python bench/grid_wall.py [--space edge-int8] [--points 2048] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import workloads  # noqa: E402
from accel_dse.search.scoring import grid  # noqa: E402
from accel_dse.search.scoring.evaluator import ModelEvaluator  # noqa: E402
from accel_dse.search.space.space_file import load_space  # noqa: E402


class Block:
    """The points ``offset .. offset + size - 1`` of a space's grid, as a space of their own."""

    def __init__(self, space: Any, offset: int, size: int) -> None:
        self.space, self.offset, self.size = space, offset, size

    def grid_size(self) -> int:
        return self.size

    def grid_columns(self, start: int, stop: int) -> Any:
        return self.space.grid_columns(self.offset + start, self.offset + stop)

    @property
    def objectives(self) -> Any:
        return self.space.objectives

    @property
    def constraints(self) -> Any:
        return self.space.constraints

    @property
    def source(self) -> str:
        return self.space.source


def _clear_caches() -> None:
    from perf_model import program_timing
    from perf_model.compiler import (
        conv_batch,
        conv_candidates,
        conv_chain_score,
        conv_designs,
        conv_dram_links,
        conv_schedule,
        conv_score,
        conv_search,
        conv_shapes,
        conv_timed,
        network,
        vector_walk,
    )
    from perf_model.figures import one_program
    for cache in (conv_designs._GROUPS, conv_score._CACHE, conv_score._SCHEDULES, conv_score._COUNTED,
                  conv_search._CANDIDATES, conv_search._RANKINGS, conv_schedule._MEMO, one_program._CACHE,
                  conv_timed._MADE,
                  conv_chain_score._CACHE, program_timing._WALKED, program_timing._TRANSFERS, program_timing._BURSTS,
                  conv_dram_links._LINK_BUILDS, conv_shapes._SHAPES, conv_shapes._ROW_TILES, conv_shapes._RUN_GRIDS,
                  conv_shapes._ROWS, conv_shapes._TAPS, vector_walk._CACHE, vector_walk._LOADS, conv_candidates._LEVELS,
                  conv_candidates._TAPS):
        cache.clear()
    for cached in (network._link_commands, conv_designs._form_words, conv_batch._fetch_cycles, conv_batch._beats):
        cached.cache_clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="edge-int8", help="a shipped space or a space file")
    parser.add_argument("--points", type=int, default=2048, help="contiguous grid points a block")
    parser.add_argument("--blocks", type=int, default=2, help="blocks spread over the grid")
    parser.add_argument("--chunk", type=int, default=512, help="designs per model call")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--table", action="store_true", help="write a grid table: every design scored")
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory()
    table = Path(scratch.name) / "grid.npz" if args.table else None
    space = load_space(args.space)
    evaluator = ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads],
                               fpga=space.fpga)
    size = space.grid_size()
    print(f"{args.space}: {size:,} grid points; {args.blocks} blocks of {args.points:,}, chunks of {args.chunk:,}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    totals = {1: 0.0, args.workers: 0.0}
    for b in range(args.blocks):
        offset = (size - args.points) * b // max(1, args.blocks - 1)
        block = Block(space, offset, args.points)
        for workers in totals:
            _clear_caches()
            start = time.perf_counter()
            result = grid.grid_search(block, evaluator, chunk=args.chunk, workers=workers,  # type: ignore[arg-type]
                                      table=table)
            wall = time.perf_counter() - start
            totals[workers] += wall
            print(f"  block at {offset:>10,}: {workers} process(es) {wall:7.1f} s wall, "
                  f"{args.points / wall:8.1f} designs/s, {result.n_feasible:,} feasible", flush=True)
    points = args.blocks * args.points
    for workers, wall in totals.items():
        rate = points / wall
        print(f"{workers} process(es): {rate:,.1f} designs/s wall -> 10^6 designs in {1e6 / rate / 3600:,.1f} h")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""CPU of the vector-op walks on op-by-op designs: a sweep's first pass over OS/IS designs with the unit.

Draws ``--designs`` designs (seeded) of ``bench/model_throughput.py``'s grid restricted to OS and IS
arrays with the vector unit at 8 bits (so every workload runs op by op and every vector op is the
walk of its own program, ``perf_model.compiler.vector_walk``), and evaluates each workload on them
with ``perf_model.evaluate_designs``, caches cold, twice in one sitting:

* ``full``: every ``(walk key, op)`` walked as ``gemm_program_cycles(config, vector_op_program(config, op))``
  (the walk as it was: every queue-load of the chunked program walked);
* ``fast``: :data:`perf_model.compiler.vector_walk.COMPILER_WALKS` as the model uses it.

It prints the CPU seconds of each first pass (``time.process_time``), the number of distinct
``(key, op)`` walks, and whether the two give the same figures (the vector busy/stall cycles and
DRAM bytes of every design: they must, to the cycle). Nothing is asserted. ``--workloads`` picks
the workloads (default BERT-base and LLaMA decode). The machine's load average is printed too.

Run: ``.venv/bin/python bench/vector_walk.py [--designs 2000] [--workloads bert_base,llama_decode]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_throughput import grid_columns  # noqa: E402

import perf_model  # noqa: E402
import workloads  # noqa: E402
from perf_model import program_timing  # noqa: E402
from perf_model.compiler import vector_walk  # noqa: E402
from perf_model.compiler.vector_chunks import vector_op_program  # noqa: E402
from perf_model.evaluator import vector_walk as evaluator_walks  # noqa: E402
from perf_model.evaluator.vector_walk import OpWalk, VectorWalks  # noqa: E402
from perf_model.figures import design_table  # noqa: E402
from perf_model.program_timing import dram_rate, gemm_program_cycles, program_dram_bytes  # noqa: E402


def _full_walk(config, op, key):  # type: ignore[no-untyped-def]
    """The walk of every queue-load of the op's program (no sharing), memoised by ``(key, op)`` only."""
    found = _FULL.get((key, op))
    if found is None:
        try:
            program = vector_op_program(config, op)
            t = gemm_program_cycles(config, program, rate=dram_rate(config))
            read, written = program_dram_bytes(config, program.commands)
            found = OpWalk(t.total, t.vector, read, written)
        except Exception as exc:  # noqa: BLE001 -- the reason, as the model records it
            found = str(exc)
        _FULL[(key, op)] = found
    return found


_FULL: dict[tuple[object, ...], OpWalk | str] = {}
FULL_WALKS = VectorWalks(key=vector_walk.walk_key, walk=_full_walk)


def _columns(n: int) -> dict[str, np.ndarray]:
    cols = grid_columns()
    keep = np.flatnonzero((cols["dataflow"] != 0) & (cols["input_bits"] == 8))
    pick = np.sort(np.random.default_rng(50).choice(keep, size=min(n, len(keep)), replace=False))
    out = {k: v[pick] for k, v in cols.items()}
    out["vector_unit"] = np.ones(len(pick), dtype=bool)
    return out


def _clear() -> None:
    vector_walk.clear_caches()
    program_timing._TRANSFERS.clear()
    evaluator_walks._KEYS.clear()
    _FULL.clear()


def _figures(table: object) -> tuple[np.ndarray, ...]:
    names = ("feasible", "vector_cycles", "stall_cycles", "total_cycles", "dram_read_bytes", "dram_write_bytes")
    return tuple(np.asarray(getattr(table, name)) for name in names if hasattr(table, name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=2000)
    parser.add_argument("--workloads", default="bert_base,llama_decode")
    args = parser.parse_args()
    designs = perf_model.DesignArrays.from_columns(**_columns(args.designs))
    print(f"{len(designs):,} OS/IS designs with the vector unit; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    perf_model.evaluate_designs(designs, workloads.resolve("gemm"))  # warm-up (imports)
    for name in args.workloads.split(","):
        wl = workloads.resolve(name)
        got = {}
        for label, walks in (("full", FULL_WALKS), ("fast", vector_walk.COMPILER_WALKS)):
            _clear()
            cpu = time.process_time()
            design_table.COMPILER_WALKS = walks  # the walks evaluate_designs passes the evaluator
            table = perf_model.evaluate_designs(designs, wl)
            got[label] = (time.process_time() - cpu, _figures(table), len(_FULL))
        same = all(np.array_equal(a, b) for a, b in zip(got["full"][1], got["fast"][1], strict=True))
        print(f"  {name:13s}: first pass full walk {got['full'][0]:7.2f} s CPU ({got['full'][2]} (key, op) walks), "
              f"fast {got['fast'][0]:7.2f} s CPU; same figures: {same}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time of the Verilog generation of a simulation top (what ``simulate``/``verify`` convert per design).

For each given trial of a study (default: the first ``--top`` of its ranking), ``rtl_gen.system_verilog``
of the design's simulation top (DRAM model of ``--dram-words`` words) is generated with a fresh Verilog
cache directory shared by the designs of this run (``--no-cache``: none); printed per design: wall
seconds, CPU seconds (the figure the load bends least) and the text's size. Then the first design
again (with the cache: a whole-text hit). The load average is printed beside each figure (the machine is shared).

``--repo DIR`` imports accel-dse from another checkout (e.g. ``git archive`` of main) for a before/after
pair in one sitting (a checkout without the cache ignores it and converts every time):

    .venv/bin/python bench/verify_verilog.py --study sqlite:///runs/edge-int8/study.db --top 3
    .venv/bin/python bench/verify_verilog.py --repo /tmp/main --study sqlite:///runs/edge-int8/study.db --top 3

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import inspect
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    """CPU seconds of this process and its children (Yosys runs as a child)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", help="import accel-dse from this checkout (default: this one)")
    parser.add_argument("--study", required=True, help="storage URL of the study")
    parser.add_argument("--name", default=None, help="study name (default: the storage's only study)")
    parser.add_argument("--top", type=int, default=2, help="designs of the ranking (default %(default)s)")
    parser.add_argument("--dram-words", type=int, default=1 << 20)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args()
    repo = Path(args.repo or Path(__file__).resolve().parent.parent).resolve()
    sys.path.insert(0, str(repo))

    import optuna

    import rtl_gen
    from accel_dse.report import load_study, trial_config

    name = args.name or optuna.get_all_study_names(args.study)[0]
    view = load_study(args.study, name, read_only=True)
    trials = [t for layer in view.ranked_layers() for t in layer][:args.top]
    has_cache = "cache_dir" in inspect.signature(rtl_gen.system_verilog).parameters
    cache = None if args.no_cache or not has_cache else tempfile.mkdtemp(prefix="accel-dse-verilog-")
    print(f"repo {repo}; {os.cpu_count()} CPUs; Verilog cache {cache or 'none'}; load {_load()}", flush=True)
    extra = {"cache_dir": cache} if cache else {}
    configs = [trial_config(t, study=name) for t in trials]
    for config in [*configs, configs[0]]:
        load0 = _load()
        start, cpu = time.perf_counter(), _cpu()
        text = rtl_gen.system_verilog(config, dram=(20, args.dram_words), **extra)
        seconds, cpu = time.perf_counter() - start, _cpu() - cpu
        print(f"{config.short_name()} {config.config_hash} (vector lanes {config.vector_lanes}, ifmap "
              f"{config.ifmap_sram_kib} KiB): {seconds:.1f} s wall, {cpu:.1f} CPU-s, {len(text) / 1e6:.2f} MB; "
              f"load {load0} -> {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

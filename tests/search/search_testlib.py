"""Shared helpers of the search tests (no pytest import: process tests run it as a script too).

``python search_testlib.py STORAGE --sampler S --trials N [--jobs J] [--cli SPACE_FILE]`` runs one
sweep worker on :data:`SMALL_SPACE` with the stand-in model; with ``--cli`` it writes the space
to SPACE_FILE and goes through ``accel_dse.cli.main`` (the evaluator swapped for the stand-in).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from accel_dse.search import ModelEvaluator, parse_space  # noqa: E402
from workloads.ops import Gemm, Workload  # noqa: E402

#: Two tiny GEMM workloads for the stand-in model (no JAX needed).
WORKLOAD_A = Workload(name="a", ops=(Gemm(m=64, k=128, n=96), Gemm(m=256, k=64, n=64)), counts=(2, 1))
WORKLOAD_B = Workload(name="b", ops=(Gemm(m=512, k=512, n=128),))

SMALL_SPACE = {
    "name": "small",
    "objectives": ["edp"],
    "workloads": [{"spec": "a"}],
    "params": {
        "rows": {"low": 2, "high": 64, "scale": "pow2"},
        "cols": {"low": 2, "high": 64, "scale": "pow2"},
        "dataflow": ["ws", "os", "is"],
        "weight_sram_kib": {"low": 1, "high": 8, "scale": "pow2"},
        "dram_bytes_per_cycle": [4.0, 16.0, 64.0],
        "clock_mhz": {"low": 200.0, "high": 1000.0, "step": 200.0},
        "double_buffered": [True, False],
    },
}
SMALL_SPACE_TOML = """name = "small"
objectives = ["edp"]
workloads = ["a"]
[params]
rows = { low = 2, high = 64, scale = "pow2" }
cols = { low = 2, high = 64, scale = "pow2" }
dataflow = ["ws", "os", "is"]
weight_sram_kib = { low = 1, high = 8, scale = "pow2" }
dram_bytes_per_cycle = [4.0, 16.0, 64.0]
clock_mhz = { low = 200.0, high = 1000.0, step = 200.0 }
double_buffered = [true, false]
"""


def make_space(**overrides):
    """:data:`SMALL_SPACE` with top-level keys replaced."""
    return parse_space({**SMALL_SPACE, **overrides}, source="test space")


def standin_evaluator(space=None, workloads=None):
    """A ModelEvaluator on the stand-in model (picklable: the model is named by module)."""
    table = {"a": WORKLOAD_A, "b": WORKLOAD_B}
    specs = workloads or ([(w.spec, w.weight) for w in space.workloads] if space else [("a", 1.0)])
    return ModelEvaluator([(name, weight, table[name]) for name, weight in specs], model="standin_model")


def _stall_in_trial_creation(after: int) -> None:
    """Make the (after+1)-th trial this process creates hang inside ``optuna.Trial(...)``, announcing it on stdout."""
    import time

    from optuna.trial import _trial

    original = _trial.Trial.__init__
    created = [0]

    def stall(self, study, trial_id):
        created[0] += 1
        if created[0] > after:
            print(f"stalled {trial_id}", flush=True)
            time.sleep(3600)
        original(self, study, trial_id)

    _trial.Trial.__init__ = stall


def _main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("storage")
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--heartbeat", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cli", metavar="SPACE_FILE", default=None, help="go through the CLI")
    parser.add_argument("--stall-after", type=int, default=None, metavar="N",
                        help="after N trials, stall forever as the next trial is created (before the sampler "
                             "draws it: no parameter, no attribute written by the objective, no heartbeat yet)")
    args = parser.parse_args()
    if args.stall_after is not None:
        _stall_in_trial_creation(args.stall_after)
    if args.cli:
        import accel_dse.cli.sweep as sweep_cli
        from accel_dse.cli import main

        space_file = Path(args.cli)
        space_file.write_text(SMALL_SPACE_TOML)
        sweep_cli._evaluator = lambda space: standin_evaluator(space)
        argv = ["sweep", "--space", str(space_file), "--storage", args.storage, "--study", "k",
                "--sampler", args.sampler, "--trials", str(args.trials), "--jobs", str(args.jobs), "--quiet",
                "--heartbeat", str(args.heartbeat)]
        return main(argv)
    from accel_dse.search import SweepConfig, run_sweep

    space = make_space()
    config = SweepConfig(space=space, evaluator=standin_evaluator(space), storage=args.storage, study_name="k",
                         sampler=args.sampler, n_trials=args.trials, jobs=args.jobs, seed=args.seed,
                         heartbeat_interval=args.heartbeat, grace_period=2 * args.heartbeat)
    try:
        run_sweep(config)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(_main())

"""Fixtures of the search tests: the stand-in model, small spaces, subprocess helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
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


def make_space(**overrides):
    doc = {**SMALL_SPACE, **overrides}
    return parse_space(doc, source="test space")


def standin_evaluator(space=None, workloads=None):
    """A ModelEvaluator on the stand-in model (picklable: the model is named by module)."""
    table = {"a": WORKLOAD_A, "b": WORKLOAD_B}
    specs = workloads or ([(w.spec, w.weight) for w in space.workloads] if space else [("a", 1.0)])
    return ModelEvaluator([(name, weight, table[name]) for name, weight in specs], model="standin_model")


@pytest.fixture
def small_space():
    return make_space()


@pytest.fixture
def subprocess_env():
    """Environment for Python subprocesses that import accel_dse and the stand-in model."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    return env

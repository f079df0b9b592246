"""The evaluator scores convs on chip with the scorers its caller passes, and holds none of its own.

The evaluator sits below the compiler: it must not import it, nor be handed its scorers by a
registration at import (which made the figure depend on what had been imported). These tests hold
that every call says which scorers it uses, that none means every conv is its im2col GEMM, and that
the compiler's scorers put a weight-stationary conv on chip with its program's cycles.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.conv_score import conv_figures
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.evaluator import conv_ops
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Conv2d, Requant

REPO = Path(__file__).resolve().parents[2]
CONV = Conv2d(n=1, h=10, w=10, c_in=8, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1,
              requant=Requant(multiplier=(1 << 30,), shift=(0,)), name="c")
WS = ArrayConfig(rows=8, cols=8, dataflow="ws", ifmap_sram_kib=16, weight_sram_kib=16, ofmap_sram_kib=16)


def _block(scorers: conv_ops.ConvScorers | None):
    return evaluate_block(DesignArrays.from_configs([WS]), op_arrays([(CONV, 1)]), DEFAULT_ENERGY,
                          area_coefficients(), scorers=scorers)


def test_every_call_names_its_scorers():
    with pytest.raises(TypeError, match="scorers"):
        evaluate_block(DesignArrays.from_configs([WS]), op_arrays([(CONV, 1)]), DEFAULT_ENERGY,  # type: ignore[call-arg]
                       area_coefficients())


def test_without_scorers_a_conv_is_its_gemm_and_with_them_its_program():
    host, chip = _block(None), _block(COMPILER_SCORERS)
    assert host.conv_note(0, 0) == ("", "")
    assert chip.conv_note(0, 0)[0] == "chip"
    figures = conv_figures(WS, CONV, True)
    assert not isinstance(figures, str) and figures.feasible
    assert int(chip.total_cycles[0, 0]) == figures.total
    assert float(chip.dram_read.sum()) == sum(figures.read) == 10 * 10 * 8 + 72 * 8  # the image once, the weights
    assert float(host.dram_read.sum()) >= 100 * 72 + 72 * 8  # the host's im2col A: 100 windows of 3*3*8


def test_the_evaluator_keeps_no_scorer_at_module_level():
    """No module of the evaluator holds a list or dict of callables filled by a function (the old
    ``register_*``), and none imports the compiler."""
    for path in sorted((REPO / "perf_model" / "evaluator").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert not node.name.startswith("register"), f"{path.name}: {node.name}"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("perf_model.compiler"), f"{path.name} imports {node.module}"
    assert "scorers" in inspect.signature(conv_ops.conv_overlay).parameters

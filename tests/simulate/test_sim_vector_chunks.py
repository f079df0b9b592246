"""simulate runs a vector op that does not fit the ifmap as the chunked program the model walks
(``perf_model.compiler.vector_chunks.vector_op_program``): bit-exact against JAX, its RTL total the
walk's (``gemm_program_cycles``), on a design whose ifmap holds 256 words of 4 lanes: element-wise
words, norm rows, a causal softmax's period cut in runs (the mask's offset moved), a RoPE's
positions and a position's heads, a pooling's bands of output rows, its channel-word slices and
tiles of a row's columns."""

from __future__ import annotations

import dataclasses

import pytest

import perf_model
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_spec.isa import Opcode
from perf_model.compiler.vector import vector_program
from perf_model.compiler.vector_chunks import vector_op_program
from workloads import Gemm, VectorOp, Workload
from workloads import _int_ops as io

SMALL = dataclasses.replace(load_design("tiny-vector"), ifmap_sram_kib=1)
POOL = {"window_h": 3, "window_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}


def _op(kind: str, shape: tuple[int, ...], params: dict[str, int], axis: int | None = None, name: str = "") -> VectorOp:
    return VectorOp(kind=kind, shape=shape, axis=axis, params=tuple(params.items()), name=name)


OPS = {
    "act": _op("gelu", (8, 100), io.GELU_PARAMS),
    "res": _op("add", (20, 40), io.add_params(0.05, 0.07, 0.06)),
    "ln": _op("layernorm", (1, 30, 40), io.norm_params(40, 1e-5), axis=2),
    "causal": _op("softmax", (1, 1, 16, 40), io.softmax_params(0.5, 0), axis=3),
    "rope": _op("rope", (1, 8, 4, 16), {"start": 5, "theta": 10000}),
    "heads": _op("rope", (1, 2, 40, 16), {"start": 9, "theta": 10000}),
    "bands": _op("maxpool", (1, 12, 12, 8), POOL),
    "slices": _op("avgpool", (1, 10, 10, 40), POOL),
    "tiles": _op("maxpool", (1, 3, 100, 4), POOL),  # one output row does not fit: tiles of its columns
}


def test_each_op_is_chunked_here():
    """Not one of them fits the ifmap whole: each runs as several chunks."""
    for name, op in OPS.items():
        with pytest.raises(ValueError):  # ModelError and FieldRangeError are both ValueErrors
            vector_program(SMALL, [op])
        program = vector_op_program(SMALL, op)
        assert sum(c.opcode == Opcode.STORE for c in program.commands) > 2, name  # one a chunk


@pytest.mark.parametrize("names", [("act", "res", "ln", "causal"), ("rope", "heads", "bands", "slices", "tiles")])
def test_a_chunked_vector_op_runs_bit_exact_in_the_walks_cycles(sim_cache, names):
    wl = Workload(name="chunks", ops=(Gemm(m=4, k=4, n=4, name="proj"),),
                  vector_ops=tuple(dataclasses.replace(OPS[n], name=n) for n in names),
                  vector_counts=(1,) * len(names), vector_after=(1,) * len(names))
    report = simulate(SMALL, wl, simulator="icarus", work_dir=sim_cache)
    by_name = {op.name: op for op in report.ops}
    for n in names:
        op = by_name[f"vector/{n}"]
        assert op.status == "pass", (n, op.reason)
        assert op.mismatches == 0 and op.total_cycles_match
        walk = perf_model.gemm_program_cycles(SMALL, vector_op_program(SMALL, OPS[n]), rate=perf_model.dram_rate(SMALL))
        assert op.cycles_total_rtl == walk.total, n

"""What the transformer-block and vector-unit simulate tests share, independent of the compiler: the
integer steps their references are written with (a matrix op's seeded weights, the output stage, a
vector op's JAX integer definition), an encoder layer written out op by op on those steps, the small
workloads several files run (every vector kind; a residual block), and a spy on what a one-program
driver checks the RTL against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import workloads
from workloads import Gemm, VectorOp, Workload
from workloads import _int_ops as io
from workloads.ops import Requant

#: The simulator of the long fault-free runs on ``tiny`` with the vector unit (``test_sim_decoder``,
#: ``test_sim_encoder``, ``test_sim_vector``, ``test_sim_hf_llama``; ``test_sim_sampled``'s flat
#: reference): Verilator, one flat build shared by all of them (its DRAM model is 16 MiB whatever the
#: workload), where Icarus pays for every simulated cycle (the 50 k-cycle prefill took about a
#: CPU-minute). The fault runs stay in Icarus: each fault is another top, so another build.
LONG_RUN_SIMULATOR = "verilator"


def integer_steps(wl, seed: int = 0) -> tuple[Callable[..., np.ndarray], ...]:
    """``(w, out, run)`` for workload ``wl``: ``w(i)`` matrix op ``i``'s seeded ``B`` (seed ``seed + i``,
    as ``simulate`` draws it) as ``k x n`` int64; ``out(acc, i)`` op ``i``'s output stage on
    accumulators ``acc``; ``run(op, *args)`` vector op ``op`` on int8 operands (``workloads._int_ops``)."""
    import jax.numpy as jnp

    from workloads import _int_ops

    ops = wl.ops

    def w(i):
        return np.asarray(workloads.reference(ops[i], seed + i).b).astype(np.int64).reshape(ops[i].k, -1)

    def out(acc, i):
        return np.asarray(workloads.output_stage(acc, ops[i].requant)).astype(np.int64)

    def run(op, *args):
        return np.asarray(_int_ops._run(op.kind, dict(op.params), *(jnp.asarray(a, jnp.int8) for a in args)))

    return w, out, run


def encoder_layer(x: np.ndarray, w: Callable[[int], np.ndarray], gemm: Callable[..., np.ndarray],
                  vec: Callable[..., np.ndarray], vector_ops: tuple[VectorOp, ...], tokens: int,
                  heads: int) -> dict[str, np.ndarray]:
    """An encoder layer (``workloads`` ``bert_base``'s op order) on input ``x`` of ``(seqs * tokens, d)``
    codes: ``w(i)`` matrix op ``i``'s weights, ``gemm(a, b, i)`` op ``i``'s output stage on the 2-D
    product ``a @ b`` (one call per sequence and head for the attention's), ``vec(op, *args)`` vector
    op ``op`` (int64 out). Returns the tensors the program writes: ``Q``, ``K``, the probabilities
    ``S`` ``(seqs, heads, tokens, tokens)``, the context ``ctx`` and the output ``out``."""
    seqs, d = x.shape[0] // tokens, x.shape[1]
    dh = d // heads
    v_ops = vector_ops
    q, k, v = gemm(x, w(0), 0), gemm(x, w(1), 1), gemm(x, w(2), 2)
    qh, kh, vh = (t.reshape(seqs, tokens, heads, dh).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = np.stack([np.stack([gemm(qh[s, h], kh[s, h].T, 3) for h in range(heads)]) for s in range(seqs)])
    probs = vec(v_ops[0], scores)
    ctx = np.stack([np.stack([gemm(probs[s, h], vh[s, h], 4) for h in range(heads)]) for s in range(seqs)])
    ctx = ctx.transpose(0, 2, 1, 3).reshape(seqs * tokens, d)
    h1 = vec(v_ops[2], vec(v_ops[1], gemm(ctx, w(5), 5), x))
    f = vec(v_ops[3], gemm(h1, w(6), 6))
    out = vec(v_ops[5], vec(v_ops[4], gemm(f, w(7), 7), h1))
    return {"Q": q, "K": k, "S": probs, "ctx": ctx, "out": out}


def spy_references(monkeypatch, driver: Any,
                   edit: Callable[[dict[str, np.ndarray]], None] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Wrap the ``_references`` of one-program driver module ``driver`` (``accel_dse.simulate.dram.encoder``
    or ``decoder``): the returned dict gets ``given`` (the operands written to DRAM) and ``final`` (a
    copy of the tensors the RTL's are checked against) at each call; ``edit`` may then change the
    expectations the run is checked against (a wrong one the check must report)."""
    seen: dict[str, dict[str, np.ndarray]] = {}
    real = driver._references

    def spy(*args, **kwargs):
        given, final = real(*args, **kwargs)
        seen.update(given=given, final=dict(final))
        if edit is not None:
            edit(final)
        return given, final

    monkeypatch.setattr(driver, "_references", spy)
    return seen


def vector_op(kind: str, shape: tuple[int, ...], params: dict[str, int], axis: int | None = None,
              name: str = "") -> VectorOp:
    return VectorOp(kind=kind, shape=shape, axis=axis, params=tuple(params.items()), name=name)


#: One of each vector kind (a GELU, LayerNorm, a causal softmax, gated SiLU, RoPE with its table, a
#: RoPE of half a word the unit cannot run, max and average pooling) after a small GEMM.
VECTOR_KINDS = Workload(
    name="vec", ops=(Gemm(m=8, k=16, n=8, name="proj"),),
    vector_ops=(vector_op("gelu", (8, 40), io.GELU_PARAMS, name="act"),
                vector_op("layernorm", (1, 4, 40), io.norm_params(40, 1e-5), axis=2, name="ln"),
                vector_op("softmax", (1, 2, 4, 8), io.softmax_params(0.5, 0), axis=3, name="scores"),
                vector_op("silu", (6, 12), {"gated": 1}, name="gate"),
                vector_op("rope", (1, 2, 3, 8), {"start": 2047, "theta": 10000}, name="rope"),
                vector_op("rope", (1, 1, 2, 4), {"start": 0, "theta": 10000}, name="odd_rope"),  # half: 2 of 4 lanes
                vector_op("maxpool", (1, 5, 6, 10), {"window_h": 3, "window_w": 3, "stride_h": 2, "stride_w": 2,
                                                     "pad_h": 1, "pad_w": 1}, name="pool"),
                vector_op("avgpool", (2, 3, 3, 6), {"window_h": 3, "window_w": 3, "stride_h": 1, "stride_w": 1,
                                                    "pad_h": 0, "pad_w": 0}, name="gap")),
    vector_counts=(1, 2, 1, 1, 1, 1, 1, 1), vector_after=(1, 1, 1, 1, 1, 1, 1, 1))
#: The ops of :data:`VECTOR_KINDS` the unit runs, as the report names them.
VECTOR_RUNS = ("vector/act", "vector/ln", "vector/scores", "vector/gate", "vector/rope", "vector/pool", "vector/gap")

#: The requantisation of the matrix ops of the small networks below.
REQUANT = Requant(multiplier=(1 << 30) + 12345, shift=7, zero_point=0, bits=8)

#: x -> up -> GELU -> down -> add(x): the add after the last GEMM takes the block's input.
RESIDUAL_BLOCK = Workload(
    name="block", ops=(Gemm(m=6, k=8, n=12, name="up", requant=REQUANT),
                       Gemm(m=6, k=12, n=8, name="down", requant=REQUANT)),
    vector_ops=(vector_op("gelu", (6, 12), io.GELU_PARAMS, name="act"),
                vector_op("add", (6, 8), io.add_params(1 / 16, 1 / 32, 1 / 16), name="residual")),
    vector_counts=(1, 1), vector_after=(1, 2))

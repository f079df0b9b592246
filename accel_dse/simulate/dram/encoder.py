"""Transformer encoder layers from ONE program (DRAM path, weight-stationary designs with the vector unit).

When the whole workload is a stack of encoder layers (``perf_model.compiler.encoder.encoder_layer``:
the ``bert_base`` builtin), ``simulate`` runs it from the program of
``perf_model.compiler.encoder.compile_encoder``: per layer the three projections, the keys'
transpose on the vector unit, every head's scores and context, the softmax, the output projection,
the residual adds, the norms and the FFN, with no host step between them. The host writes the
input and the weights (one set, shared by the layers as the workload's repeated ops are).

Reference (integers only): ``x`` is op 0's seeded ``A`` (``workloads.reference``), each projection's
weights its op's seeded ``B`` (op ``i``'s of seed ``seed + i``), every GEMM through the output stage
(``workloads.output_stage``) and every vector op through ``workloads._int_ops`` with the workload's
parameters, in the layers' order. Every tensor the program writes stays in DRAM at its final value
(the last layer's projections, ``K``, ``K^T``, the probabilities over the scores and the context;
every layer's output): all of them are read back after the program and checked bit for bit, and the
program's total cycles against the walk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_dse.simulate.dram.block import block_for, block_job, block_program, spread_keys
from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, qparam_fields
from accel_spec.config import ArrayConfig

__all__ = ["encoder_for", "encoder_job", "encoder_note"]


def encoder_for(design: ArrayConfig, wl: Any, scale: float, notes: list[str]) -> Any:
    """The workload as encoder layers run from one program on ``design``, or ``None``
    (``accel_dse.simulate.dram.block.block_for``)."""
    from perf_model.compiler.encoder import encoder_layer

    return block_for(design, wl, scale, notes, "encoder layer", encoder_layer)


def _references(layer: Any, ops: list[Any], seed: int, bits: dict[str, Any],
                design: ArrayConfig | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The layers' input and weights (by role), and the final value of each of their tensors in DRAM
    (``x``, ``Q``, ``K``, ``KT``, ``V``, ``S``: the probabilities over the scores, ``ctx``, ``y{l}``,
    ``out``), in integers (module docstring), as codes of ``design``'s activation format
    (``accel_dse.simulate.dram.block_formats``; ``None``: int8)."""
    import workloads
    from accel_dse.simulate.dram.block_formats import block_steps

    steps = block_steps(design) if design is not None else None
    g = layer.gemms
    T, H, B, dh = layer.tokens, layer.heads, layer.seqs, layer.d_head
    x = np.asarray(workloads.reference(ops[0], seed, **bits).a).astype(np.int64).reshape(B * T, -1)
    w = {i: np.asarray(workloads.reference(ops[i], seed + i, **bits).b).astype(np.int64).reshape(ops[i].k, -1)
         for i in (0, 1, 2, 5, 6, 7)}

    def gemm(a: np.ndarray, b: np.ndarray, i: int) -> np.ndarray:
        if steps is not None:
            return steps.gemm(a, b, g[i])
        return np.asarray(workloads.output_stage(a @ b, g[i].requant)).astype(np.int64)

    def vector(op: Any, *args: np.ndarray) -> np.ndarray:
        if steps is not None:
            return steps.vector(op, *args)
        from workloads.vector_door import door_vector_op

        return door_vector_op(op.kind, dict(op.params), None, *args)

    final: dict[str, np.ndarray] = {"x": x}
    heads = [(b, h) for b in range(B) for h in range(H)]
    y = x
    for layer_index in range(layer.layers):
        inp = y
        q, k, v = gemm(inp, w[0], 0), gemm(inp, w[1], 1), gemm(inp, w[2], 2)
        kt = k.T
        s = np.stack([gemm(q[b * T:(b + 1) * T, h * dh:(h + 1) * dh], kt[h * dh:(h + 1) * dh, b * T:(b + 1) * T], 3)
                      for b, h in heads])
        p = vector(layer.softmax, s.reshape(B, H, T, T)).reshape(B * H, T, T)
        ctx = np.zeros_like(q)
        for j, (b, h) in enumerate(heads):
            ctx[b * T:(b + 1) * T, h * dh:(h + 1) * dh] = gemm(p[j], v[b * T:(b + 1) * T, h * dh:(h + 1) * dh], 4)
        y = gemm(ctx, w[5], 5)
        skips = [inp, inp, inp]
        for i, link in enumerate(layer.links):
            if i == 1:
                skips[2] = y  # the second add's operand: the FFN's input (link 1 has no add)
                y = gemm(y, w[6], 6)
            elif i == 2:
                y = gemm(y, w[7], 7)
            for op in link:
                y = vector(op, y, skips[i]) if op.kind == "add" else vector(op, y)
        final |= {"Q": q, "K": k, "KT": kt, "V": v, "S": p.reshape(B * H * T, T), "ctx": ctx,
                  ("out" if layer_index == layer.layers - 1 else f"y{layer_index}"): y}
    given = {"x": x, "wq": w[0], "wk": w[1], "wv": w[2], "wo": w[5], "w1": w[6], "w2": w[7]}
    return given, final


def encoder_job(design: ArrayConfig, selected: list[tuple[str, Any, int]], layer: Any, seed: int, latency: int,
                job_type: Any, bits: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    """The layer's one job (``job_type``: ``DramJob``), its op entry of the meta and its image."""
    prog = block_program(design, layer)
    t = prog.tensors
    g = layer.gemms
    given, final = _references(layer, [op for _, op, _ in selected], seed, bits, design)
    from accel_dse.simulate.dram.block_formats import block_steps

    requant = block_steps(design).requant
    final["KT"] = spread_keys(final["KT"], layer.seqs, layer.tokens, t["KT"].shape[1])
    x = given["x"]
    tensors = {"x": pack_tensor(t["x"], x), "b0": pack_tensor(t["b0"], given["wq"]),
               "b1": pack_tensor(t["b1"], given["wk"]), "b2": pack_tensor(t["b2"], given["wv"]),
               "tail.b0": pack_tensor(t["tail.b0"], given["wo"]), "tail.b1": pack_tensor(t["tail.b1"], given["w1"]),
               "tail.b2": pack_tensor(t["tail.b2"], given["w2"])}
    for name, i in (("q0", 0), ("q1", 1), ("q2", 2), ("q3", 3), ("q4", 4), ("tail.q0", 5), ("tail.q1", 6),
                    ("tail.q2", 7)):
        tensors[name] = pack_qparam_lanes(t[name], qparam_fields(requant(g[i]), g[i].n))
    return block_job(design, prog, tensors, final, "Q", latency, job_type)


def encoder_note(design: ArrayConfig, layer: Any) -> str:
    """The note saying what the one program runs and where its activations live."""
    from accel_spec.isa import Opcode

    prog = block_program(design, layer)
    tail = ("on chip (MOVE into the ifmap, VECTOR in place)" if any(c.opcode == Opcode.MOVE for c in prog.commands)
            else "through DRAM (the ifmap cannot hold its live activations together)")
    kinds = ", ".join(op.kind for link in layer.links for op in link)
    stack = f"{layer.layers} encoder layers" if layer.layers > 1 else "the whole encoder layer"
    return (f"one program for {stack}: the projections, the keys transposed on the vector unit, "
            f"{layer.seqs * layer.heads} heads' scores and context, the softmax on the vector unit "
            f"({len(prog.chunks)} queue-load(s)); the attention's tensors through DRAM, the output projection and FFN "
            f"with {kinds} {tail}; Q, K, K^T, V, the probabilities, the context and every layer's output read back "
            "and checked")

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

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.config import ArrayConfig
from accel_dse.simulate._dram_image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields
from accel_dse.simulate._dram_program import layout_dict

__all__ = ["encoder_for", "encoder_job", "encoder_note", "tensor_span", "spread_keys"]


@functools.lru_cache(maxsize=4)
def _program(design: ArrayConfig, layer: Any) -> Any:
    """``compile_encoder`` of ``layer`` on ``design``, kept for the few calls of one ``simulate`` (the
    check, the job and the note compile it once, as ``_dram_conv_network.network_program``)."""
    from perf_model.compiler.encoder import compile_encoder

    return compile_encoder(design, layer)


def encoder_for(design: ArrayConfig, wl: Any, scale: float, notes: list[str]) -> Any:
    """The workload as an encoder layer run from one program on ``design``, or ``None`` (with the
    reason in ``notes`` when it is a layer the design cannot run so)."""
    from accel_dse.config import Dataflow
    from accel_dse.errors import ModelError
    from perf_model.compiler.encoder import encoder_layer

    if not design.vector_unit or not wl.vector_ops or design.dataflow is not Dataflow.WS:
        return None
    try:
        layer = encoder_layer(wl)
    except ModelError:
        return None  # not an encoder layer: the other paths say what they run
    if scale != 1:
        notes.append(f"not one program for the encoder layer (scale {scale:g}: the layer runs whole, at scale 1): "
                     "each op from its own program")
        return None
    try:
        _program(design, layer)
    except ModelError as exc:
        notes.append(f"not one program for the encoder layer ({exc}): each op from its own program")
        return None
    return layer


def _references(layer: Any, ops: list[Any], seed: int, bits: dict[str, Any]) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, np.ndarray]]:
    """The layers' input and weights (by role), and the final value of each of their tensors in DRAM
    (``x``, ``Q``, ``K``, ``KT``, ``V``, ``S``: the probabilities over the scores, ``ctx``, ``y{l}``,
    ``out``), in integers (module docstring)."""
    import jax.numpy as jnp

    import workloads
    from workloads import _int_ops

    g = layer.gemms
    T, H, B, dh = layer.tokens, layer.heads, layer.seqs, layer.d_head
    x = np.asarray(workloads.reference(ops[0], seed, **bits).a).astype(np.int64).reshape(B * T, -1)
    w = {i: np.asarray(workloads.reference(ops[i], seed + i, **bits).b).astype(np.int64).reshape(ops[i].k, -1)
         for i in (0, 1, 2, 5, 6, 7)}

    def gemm(a: np.ndarray, b: np.ndarray, i: int) -> np.ndarray:
        return np.asarray(workloads.output_stage(a @ b, g[i].requant)).astype(np.int64)

    def vector(op: Any, *args: np.ndarray) -> np.ndarray:
        run = _int_ops._run(op.kind, dict(op.params), *(jnp.asarray(a.astype(np.int8)) for a in args))
        return np.asarray(run).astype(np.int64)

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
    import perf_model

    prog = _program(design, layer)
    t = prog.tensors
    g = layer.gemms
    given, final = _references(layer, [op for _, op, _ in selected], seed, bits)
    final["KT"] = spread_keys(final["KT"], layer.seqs, layer.tokens, t["KT"].shape[1])
    x = given["x"]
    tensors = {"x": pack_tensor(t["x"], x), "b0": pack_tensor(t["b0"], given["wq"]),
               "b1": pack_tensor(t["b1"], given["wk"]), "b2": pack_tensor(t["b2"], given["wv"]),
               "tail.b0": pack_tensor(t["tail.b0"], given["wo"]), "tail.b1": pack_tensor(t["tail.b1"], given["w1"]),
               "tail.b2": pack_tensor(t["tail.b2"], given["w2"])}
    for name, i in (("q0", 0), ("q1", 1), ("q2", 2), ("q3", 3), ("q4", 4), ("tail.q0", 5), ("tail.q1", 6),
                    ("tail.q2", 7)):
        tensors[name] = pack_qparam_lanes(t[name], qparam_fields(g[i].requant, g[i].n))
    timing = perf_model.gemm_program_cycles(design, prog, latency=latency, rate=perf_model.dram_rate(design))
    span, expected = tensor_span(t, final, "Q")
    meta = {"name": "network", "a_src": -1, "on_chip": False, "one_program": True,
            "instances": [{"chunks": [[prog.queue_base + a0 * 32, b0 - a0] for a0, b0 in prog.chunks],
                           "limit": 4 * timing.total + 10_000, "a": layout_dict(t["x"]),
                           "c": layout_dict(span)}]}
    m, d_model = final["out"].shape
    job = job_type(0, "network", SimpleNamespace(m=m, k=d_model, n=d_model), None, expected, span, timing.compute,
                   timing.total, timing.stall, len(prog.runs), design.input_bits)
    return job, meta, {"img_0_0": program_image(prog, tensors)}


def spread_keys(kt: np.ndarray, seqs: int, keys: int, cols: int) -> np.ndarray:
    """``K^T`` (``D x seqs keys``) as the program stores it: sequence ``b``'s keys from column ``b kc``
    of ``cols`` (``kc = (cols - keys) / (seqs - 1)``: ``perf_model.compiler.dram_graph.key_columns``),
    zeros between."""
    if seqs == 1:
        return kt
    kc = (cols - keys) // (seqs - 1)
    out = np.zeros((kt.shape[0], cols), kt.dtype)
    for b in range(seqs):
        out[:, b * kc:b * kc + keys] = kt[:, b * keys:(b + 1) * keys]
    return out


def tensor_span(t: dict[str, Any], final: dict[str, np.ndarray], first: str) -> tuple[Any, np.ndarray]:
    """The DRAM span from tensor ``first`` to the end of the last tensor of ``final`` (the tensors a
    block's program writes, which ``perf_model.compiler.dram_graph.assemble`` places one after
    another) as one layout of 4 KiB rows, and its expected bytes as int8 values ``(1, rows, 4096)``:
    every tensor's final value, zeros between them. The testbench leaves the span out of the image
    it loads (the program writes it), as any op's output. A mismatch's position is ``(0, page,
    byte)`` past ``first``'s base."""
    from perf_model.compiler.program import PAGE, TensorLayout

    lo = t[first].base
    final = {name: value for name, value in final.items() if t[name].base >= lo}
    hi = max(t[name].base + t[name].nbytes for name in final)
    rows = -(-(hi - lo) // PAGE)
    image = np.zeros(rows * PAGE, np.uint8)
    for name, value in final.items():
        raw = pack_tensor(t[name], value)
        image[t[name].base - lo:t[name].base - lo + len(raw)] = raw
    span = TensorLayout("layer", lo, rows, PAGE, 1, False, (rows, PAGE))
    return span, image.view(np.int8).astype(np.int64).reshape(1, rows, PAGE)


def encoder_note(design: ArrayConfig, layer: Any) -> str:
    """The note saying what the one program runs and where its activations live."""
    from accel_dse.commands import Opcode

    prog = _program(design, layer)
    tail = ("on chip (MOVE into the ifmap, VECTOR in place)" if any(c.opcode == Opcode.MOVE for c in prog.commands)
            else "through DRAM (the ifmap cannot hold its live activations together)")
    kinds = ", ".join(op.kind for link in layer.links for op in link)
    stack = f"{layer.layers} encoder layers" if layer.layers > 1 else "the whole encoder layer"
    return (f"one program for {stack}: the projections, the keys transposed on the vector unit, "
            f"{layer.seqs * layer.heads} heads' scores and context, the softmax on the vector unit "
            f"({len(prog.chunks)} queue-load(s)); the attention's tensors through DRAM, the output projection and FFN "
            f"with {kinds} {tail}; Q, K, K^T, V, the probabilities, the context and every layer's output read back "
            "and checked")

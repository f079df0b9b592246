"""A LLaMA decoder block from ONE program (DRAM path, weight-stationary designs with the vector unit).

When the whole workload is one decoder block (``perf_model.compiler.decoder.decoder_block``: the
``llama_block`` and ``llama_decode`` builtins, a Hugging Face Llama-style config of one layer, with
multi-head, grouped-query or multi-query attention), ``simulate`` runs it from the program of
``perf_model.compiler.decoder.compile_decoder``: the RMSNorms, the projections, RoPE, the keys'
transpose, every head's scores and context over the KV cache, the causal softmax, the residual
adds and the SwiGLU FFN, with no host step between them. The host writes the input, the KV cache's
``kv`` rows a sequence (``K``, ``V``, and the keys' columns of ``K^T``), the weights and the RoPE table.

Reference (integers only): ``x`` is op 0's seeded ``A`` (``workloads.reference``), each projection's
weights its op's seeded ``B`` (op ``i``'s of seed ``seed + i``), the cache seeded int8 codes, every
GEMM through the output stage (``workloads.output_stage``; query head ``h``'s scores and context
against key/value head ``h // group``'s cached and new keys and values) and every vector op through
``workloads._int_ops`` with the workload's parameters, in the block's order. Every tensor the
program writes stays in DRAM at its final value (the normed inputs, ``Q``, the cache with the new
keys and values, ``K^T``, the probabilities, the context, the FFN's tensors, the output): the
whole span, the cache's host-written rows included, is read back and checked bit for bit, and
the program's total cycles against the walk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_dse.simulate.dram.block import block_for, block_job, block_program, spread_keys
from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, qparam_fields
from accel_spec.config import ArrayConfig

__all__ = ["decoder_for", "decoder_job", "decoder_note"]


def decoder_for(design: ArrayConfig, wl: Any, scale: float, notes: list[str]) -> Any:
    """The workload as a decoder block run from one program on ``design``, or ``None``
    (``accel_dse.simulate.dram.block.block_for``)."""
    from perf_model.compiler.decoder import decoder_block

    return block_for(design, wl, scale, notes, "decoder block", decoder_block)


def _references(block: Any, ops: list[Any], seed: int, bits: dict[str, Any],
                design: ArrayConfig | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The block's inputs (``x``, the cache's rows ``kc``/``vc``, the weights ``w{i}``) and the final
    value of each tensor the program writes, in integers (module docstring), as codes of ``design``'s
    activation format (``accel_dse.simulate.dram.block_formats``; ``None``: int8)."""
    import workloads
    from accel_dse.simulate.dram.block_formats import block_steps
    from accel_dse.simulate.dram.vector import operand_codes
    from accel_spec.vector_door import door_format

    steps = block_steps(design) if design is not None else None
    fmt = door_format(design.act_fmt) if design is not None else None
    g, v = block.gemms, block.vector
    T, Tk, H, B, dh, kv = block.tokens, block.keys, block.heads, block.seqs, block.d_head, block.kv
    D, Dkv, G = block.d_model, block.d_kv, block.group  # a key/value head serves G query heads (GQA/MQA)
    x = np.asarray(workloads.reference(ops[0], seed, **bits).a).astype(np.int64).reshape(B * T, D)
    w = {i: np.asarray(workloads.reference(ops[i], seed + i, **bits).b).astype(np.int64).reshape(ops[i].k, -1)
         for i in (0, 1, 2, 5, 6, 7, 8)}
    rng = np.random.default_rng([seed, 0x6B76])
    kc, vc = (operand_codes(rng, (B, kv, Dkv), fmt).astype(np.int64) for _ in range(2))

    def gemm(a: np.ndarray, b: np.ndarray, i: int) -> np.ndarray:
        if steps is not None:
            return steps.gemm(a, b, g[i])
        return np.asarray(workloads.output_stage(a @ b, g[i].requant)).astype(np.int64)

    def vector(name: str, *args: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
        from workloads.vector_door import door_vector_op

        op = v[name]
        shaped = [a.reshape(shape or a.shape) for a in args]
        return door_vector_op(op.kind, dict(op.params), fmt, *shaped).reshape(args[0].shape)

    h = vector("norm1", x)
    q = vector("rope_q", gemm(h, w[0], 0), shape=(B, T, H, dh))
    k_new = vector("rope_k", gemm(h, w[1], 1), shape=(B, T, H // G, dh)).reshape(B, T, Dkv)
    v_new = gemm(h, w[2], 2).reshape(B, T, Dkv)
    keys = np.concatenate([kc, k_new], axis=1).reshape(B * Tk, Dkv)
    values = np.concatenate([vc, v_new], axis=1).reshape(B * Tk, Dkv)
    kt = keys.T
    heads = [(b, hh) for b in range(B) for hh in range(H)]
    s = np.stack([gemm(q[b * T:(b + 1) * T, hh * dh:(hh + 1) * dh],
                       kt[hh // G * dh:(hh // G + 1) * dh, b * Tk:(b + 1) * Tk], 3) for b, hh in heads])
    p = vector("softmax", s.reshape(B, H, T, Tk)).reshape(B * H, T, Tk)
    ctx = np.zeros_like(q)
    for j, (b, hh) in enumerate(heads):
        ctx[b * T:(b + 1) * T, hh * dh:(hh + 1) * dh] = gemm(p[j], values[b * Tk:(b + 1) * Tk,
                                                                       hh // G * dh:(hh // G + 1) * dh], 4)
    o = gemm(ctx, w[5], 5)
    x1 = vector("add1", x, o)
    h2 = vector("norm2", x1)
    gate, up = gemm(h2, w[6], 6), gemm(h2, w[7], 7)
    gl = vector("silu", gate, up)
    dn = gemm(gl, w[8], 8)
    out = vector("add2", x1, dn)
    given = {"x": x, "K": np.concatenate([kc, np.zeros_like(k_new)], axis=1).reshape(B * Tk, Dkv),
             "KT": np.concatenate([kc, np.zeros_like(k_new)], axis=1).reshape(B * Tk, Dkv).T,
             "V": np.concatenate([vc, np.zeros_like(v_new)], axis=1).reshape(B * Tk, Dkv),
             **{f"w{i}": wi for i, wi in w.items()}}
    final = {"h": h, "Q": q, "K": keys, "V": values, "KT": kt, "S": p.reshape(B * H * T, Tk), "ctx": ctx, "o": o,
             "x1": x1, "h2": h2, "gate": gate, "up": up, "g": gl, "dn": dn, "out": out}
    return given, final


def _rope_table(block: Any, lanes: int) -> np.ndarray:
    """The RoPE table: a row a new token's position ``kv + i`` (``workloads.rope_op_rows``)."""
    from workloads import rope_op_rows

    return np.array(rope_op_rows(block.vector["rope_q"], block.tokens, lanes), np.int64)


def decoder_job(design: ArrayConfig, selected: list[tuple[str, Any, int]], block: Any, seed: int, latency: int,
                job_type: Any, bits: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    """The block's one job (``job_type``: ``DramJob``), its op entry of the meta and its image."""
    from perf_model.compiler.decoder import _columns, gemm_groups

    prog = block_program(design, block)
    t = prog.tensors
    given, final = _references(block, [op for _, op, _ in selected], seed, bits, design)
    from accel_dse.simulate.dram.block_formats import block_steps

    requant = block_steps(design).requant
    final["KT"] = spread_keys(final["KT"], block.seqs, block.keys, t["KT"].shape[1])
    given["KT"] = spread_keys(given["KT"], block.seqs, block.keys, t["KT"].shape[1])
    tensors = {name: pack_tensor(t[name], given[name]) for name in ("x", "K", "V", "KT")}
    tensors["rope"] = pack_tensor(t["rope"], _rope_table(block, design.vector_lanes))
    for i, spans in enumerate(gemm_groups(block)):
        rq = requant(block.gemms[i])
        for c0, n, tag in spans:
            if f"w{i}" in given:
                tensors[f"b{tag}"] = pack_tensor(t[f"b{tag}"], given[f"w{i}"][:, c0:c0 + n])
            tensors[f"q{tag}"] = pack_qparam_lanes(t[f"q{tag}"], qparam_fields(_columns(rq, c0, n), n))
    return block_job(design, prog, tensors, final, "h", latency, job_type, poke_all=True)


def decoder_note(design: ArrayConfig, block: Any) -> str:
    """The note saying what the one program runs and where its tensors live."""
    prog = block_program(design, block)
    phase = (f"decode of one token after a KV cache of {block.kv}" if block.tokens == 1 else
             f"prefill of {block.tokens} tokens" + (f" after a KV cache of {block.kv}" if block.kv else ""))
    return (f"one program for the whole decoder block ({phase}): the RMSNorms, the projections, RoPE, the keys "
            f"transposed on the vector unit, {block.seqs * block.heads} heads' scores and context"
            + (f" (each of {block.key_heads} key/value head(s) serving {block.group} query heads)" if block.group > 1
               else "") + ", the causal softmax, "
            f"the residual adds and the SwiGLU FFN ({len(prog.chunks)} queue-load(s)), every tensor through DRAM; "
            "the cache's new rows written after the host's, and every tensor the program writes read back and checked")

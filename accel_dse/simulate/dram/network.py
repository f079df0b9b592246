"""A chained network with vector ops on its links, from ONE program (DRAM path).

When a workload's matrix ops chain (``workloads.chain_link``) and each of its vector ops is a
link op (``perf_model.compiler.network.LINK_KINDS``: element-wise of one operand, a residual add
whose second operand is the input of its block's first GEMM, a LayerNorm or RMSNorm per token)
after one of them (several after one GEMM run in the workload's order), on a design with
``vector_unit`` whose ifmap holds the live tensors, ``simulate`` runs the whole network from
one program (``perf_model.compiler.network.compile_network``): no host
step between the ops. The reference is the chain of the GEMMs' JAX references (op 0's ``A``, op
``i``'s weights of seed ``seed + i``, as ``workloads.chained_references``) through the output
stage, with each link's integer vector op (``workloads._int_ops``; on fp8 or int4 activations
behind the unit's door, ``accel_dse.simulate.dram.block_formats``) applied to the requantised
output (an add's second operand: its skip GEMM's input); only the network's output reaches DRAM,
and it is checked bit for bit, the program's total cycles against the walk.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields
from accel_dse.simulate.dram.job_files import layout_dict
from accel_spec.config import ArrayConfig

__all__ = ["network_links", "network_job", "network_note"]


def _gemms(selected: list[tuple[str, Any, int]], scale: float) -> list[Any]:
    import workloads

    out = []
    for _, op, _ in selected:
        f = op.to_gemm()
        out.append(workloads.Gemm(m=max(1, math.ceil(f.m * scale)), k=f.k, n=f.n, name=f.name, requant=op.requant))
    return out


def network_links(design: ArrayConfig, wl: Any, selected: list[tuple[str, Any, int]], scale: float,
                  notes: list[str]) -> list[Any] | None:
    """The link ops (one per link, ``None`` where there is none) when ``wl`` runs as one program, else ``None``."""
    from accel_spec.errors import ModelError
    from perf_model.compiler.network import LINK_KINDS, compile_network

    if not design.vector_unit or not wl.vector_ops or len(selected) < 2:
        return None
    links: list[Any] = [() for _ in selected]
    after = wl.vector_after or (len(selected),) * len(wl.vector_ops)
    counts = wl.vector_counts or (1,) * len(wl.vector_ops)
    for op, where, count in zip(wl.vector_ops, after, counts, strict=True):
        if not 1 <= where <= len(selected) or count != 1 or op.kind not in LINK_KINDS:
            return None
        links[where - 1] += (op,)
    if not links[-1]:
        links.pop()
    try:
        compile_network(design, _gemms(selected, scale), links)
    except ModelError as exc:
        notes.append(f"not one program for the network ({exc}): each op from its own program")
        return None
    return links


def network_job(design: ArrayConfig, selected: list[tuple[str, Any, int]], links: list[Any], scale: float,
                seed: int, latency: int, job_type: Any, bits: dict[str, Any]) -> tuple[Any, dict[str, Any],
                                                                                     dict[str, np.ndarray]]:
    """The network's one job (``job_type``: ``DramJob``), its op entry of the meta and its image."""
    import perf_model
    import workloads
    from accel_dse.simulate.dram.block_formats import design_gemm
    from accel_spec.vector_door import door_format
    from perf_model.compiler.network import TWO_OPERAND, compile_network, link_ops, residual_skips
    from workloads.vector_door import door_vector_op

    skips = residual_skips(links)
    gemms = _gemms(selected, scale)
    prog = compile_network(design, gemms, links)
    ops = [op for _, op, _ in selected]
    m = gemms[0].m
    a = np.asarray(workloads.reference(ops[0], seed, **bits).a[:m]).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a)}
    x = a
    inputs = []
    for i, (op, gemm) in enumerate(zip(ops, gemms, strict=True)):
        inputs.append(x)
        b = np.asarray(workloads.reference(op, seed + i, **bits).b).astype(np.int64)
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], b)
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(gemm.requant, gemm.n))
        x = design_gemm(design, gemm, x, b)
        for vop in link_ops(links[i]) if i < len(links) else ():
            args = [x]
            skip = skips[i]
            if vop.kind in TWO_OPERAND and skip is not None:
                args.append(inputs[skip])
            x = door_vector_op(vop.kind, dict(vop.params), door_format(design.act_fmt), *args)
    last = len(gemms) - 1
    timing = perf_model.program_cycles(design, prog.commands, latency=latency, rate=perf_model.dram_rate(design))
    meta = {"name": "network", "a_src": -1, "on_chip": False, "one_program": True,
            "instances": [{"chunks": [[prog.queue_base + a0 * 32, b0 - a0] for a0, b0 in prog.chunks],
                           "limit": 4 * timing.total + 10_000, "a": layout_dict(t["a0"]),
                           "c": layout_dict(t[f"c{last}"])}]}
    full = ops[0].to_gemm().m
    job = job_type(0, "network", SimpleNamespace(m=m, k=gemms[0].k, n=gemms[-1].n),
                   {"m": full, "batch": 1} if m != full else None, x.reshape(1, m, gemms[-1].n), t[f"c{last}"],
                   timing.compute, timing.total, timing.stall, len(prog.runs), design.input_bits)
    return job, meta, {"img_0_0": program_image(prog, tensors)}


def network_note(design: ArrayConfig, selected: list[tuple[str, Any, int]], links: list[Any], scale: float) -> str:
    """The note saying how the one program keeps the network's activations."""
    from accel_spec.isa import Opcode
    from perf_model.compiler.network import compile_network, link_ops

    kinds = ", ".join(op.kind for link in links for op in link_ops(link))
    prog = compile_network(design, _gemms(selected, scale), links)
    how = ("activations kept on chip (MOVE into the ifmap, VECTOR in place, the next RUN reads it)"
           if any(c.opcode == Opcode.MOVE for c in prog.commands) else
           "links through DRAM, as the ifmap cannot hold the live activations together (each output stored, "
           "its vector ops run on ifmap chunks of it, the next GEMM loads it)")
    return (f"one program for the whole network: {len(selected)} GEMMs and {kinds} on the vector unit, {how}; "
            "only the network's output is read back")

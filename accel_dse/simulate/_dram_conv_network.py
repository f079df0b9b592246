"""A chain of convolutions from ONE program (DRAM path, weight-stationary designs).

When the selected ops are two or more requantised int8 convolutions of one batch where each reads
the previous one's NHWC output (grouped and depthwise convs too) (``--ops layer1.0.conv1,layer1.0.conv2`` of ``resnet18``: the
ReLU between them is the output stage's clamp), ``simulate`` runs them from one program of
``perf_model.compiler.conv_network.compile_conv_network``: each conv's output kept in the ifmap
as the next conv's input when the tensors fit (MOVE, the next window reads it in place), else
through DRAM inside the program. Reference: op 0's NHWC input and each op's weights as
``workloads.conv_nhwc_reference`` makes them (op ``i``'s of seed ``seed + i``), each conv through
``lax.conv_general_dilated`` on the previous op's requantised output and the output stage; only
the last op's output reaches DRAM and is checked bit for bit, the program's total cycles against
the walk.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.config import ArrayConfig
from accel_dse.simulate._dram_image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields
from accel_dse.simulate._dram_program import layout_dict

__all__ = ["conv_chain", "conv_network_job", "conv_network_note"]


def conv_chain(design: ArrayConfig, selected: list[tuple[str, Any, int]], notes: list[str]) -> bool:
    """Whether ``selected`` runs as one conv-network program on ``design`` (module docstring); a
    chain the compiler cannot build as one program is named in ``notes`` with its reason."""
    from accel_dse.errors import ModelError
    from perf_model.compiler.conv import conv_served
    from perf_model.compiler.conv_network import compile_conv_network
    from workloads.ops import Conv2d

    ops = [op for _, op, _ in selected]
    if len(ops) < 2 or conv_served(design) or design.input_bits != 8 or not design.weight_fmt.is_int:
        return False
    if min(design.weight_fmt.bits, design.act_fmt.bits) < 8:
        return False
    for i, op in enumerate(ops):
        if not isinstance(op, Conv2d) or op.requant is None:
            return False
        if i and (op.n, op.h, op.w, op.c_in) != (ops[0].n, ops[i - 1].out_h, ops[i - 1].out_w, ops[i - 1].c_out):
            return False
    try:
        compile_conv_network(design, ops, [None] * (len(ops) - 1))
    except ModelError as exc:
        notes.append(f"not one program for the convs ({exc}): each op from its own program")
        return False
    return True


def conv_network_job(design: ArrayConfig, selected: list[tuple[str, Any, int]], seed: int, latency: int,
                     job_type: Any) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    """The network's one job (``job_type``: ``DramJob``), its op entry of the meta and its image.

    Raises:
        ModelError: the compiler cannot build the program (its reason).
    """
    import jax.numpy as jnp
    from jax import lax

    import perf_model
    import workloads
    from perf_model.compiler.conv import conv_weight_matrix
    from perf_model.compiler.conv_network import compile_conv_network

    convs = [op for _, op, _ in selected]
    prog = compile_conv_network(design, convs, [None] * (len(convs) - 1))
    t = prog.tensors
    x = np.asarray(workloads.conv_nhwc_reference(convs[0], seed)[0]).astype(np.int64)
    tensors = {"a0": pack_tensor(t["a0"], x.reshape(-1, convs[0].c_in))}
    h = x
    for i, op in enumerate(convs):
        w = np.asarray(workloads.conv_nhwc_reference(op, seed + i)[1]).astype(np.int64)
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], conv_weight_matrix(op, prog.convs[i], design.rows, w))
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(op.requant, op.c_out))
        acc = lax.conv_general_dilated(
            jnp.asarray(h, jnp.int8), jnp.asarray(w, jnp.int8), (op.stride_h, op.stride_w),
            ((op.pad_h, op.pad_h_hi), (op.pad_w, op.pad_w_hi)), rhs_dilation=(op.dilation_h, op.dilation_w),
            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=op.groups,
            preferred_element_type=jnp.int32)
        h = np.asarray(workloads.output_stage(acc, op.requant)).astype(np.int64)
    last = len(convs) - 1
    timing = perf_model.gemm_program_cycles(design, prog, latency=latency, rate=perf_model.dram_rate(design))
    meta = {"name": "network", "a_src": -1, "on_chip": False, "one_program": True,
            "instances": [{"chunks": [[prog.queue_base + a0 * 32, b0 - a0] for a0, b0 in prog.chunks],
                           "limit": 4 * timing.total + 10_000, "a": layout_dict(t["a0"]),
                           "c": layout_dict(t[f"c{last}"])}]}
    pixels = convs[-1].n * convs[-1].out_h * convs[-1].out_w  # every image's, in the output tensor's rows
    job = job_type(0, "network", SimpleNamespace(m=pixels, k=convs[0].c_in, n=convs[-1].c_out), None,
                   h.reshape(1, pixels, convs[-1].c_out), t[f"c{last}"], timing.compute, timing.total, timing.stall,
                   len(prog.runs), design.input_bits, conv=True)
    return job, meta, {"img_0_0": program_image(prog, tensors)}


def conv_network_note(design: ArrayConfig, selected: list[tuple[str, Any, int]]) -> str:
    """The note saying how the one program keeps the convs' activations."""
    from perf_model.compiler.conv_network import compile_conv_network

    convs = [op for _, op, _ in selected]
    prog = compile_conv_network(design, convs, [None] * (len(convs) - 1))
    how = ("each output kept in the ifmap as the next conv's NHWC input (MOVE, the next window reads it in place, "
           "pads made on chip)" if prog.on_chip else
           "links through DRAM, as the ifmap cannot hold the tensors beside the bands (each output stored, the next "
           "conv loads its bands from it)")
    return (f"one program for the whole network: {len(convs)} convs, {how}; only the network's output is read back")

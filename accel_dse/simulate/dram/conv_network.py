"""A chain of convolutions from ONE program (DRAM path, weight-stationary designs).

When the selected ops are two or more requantised int8 convolutions of one batch where each reads
the previous one's NHWC output (grouped and depthwise convs too; ``--ops
layer1.0.conv1,layer1.0.conv2`` of ``resnet18``: the ReLU between them is the output stage's
clamp), ``simulate`` runs them from one program of
``perf_model.compiler.conv_network.compile_conv_network``: each conv's output kept in the ifmap
as the next conv's input when the tensors fit (MOVE, the next window reads it in place), else
through DRAM inside the program. Simulating a whole workload, each chain the model keeps on chip
(:func:`kept_chains`) runs so, the other ops from their own programs. Reference: op 0's NHWC
input and each op's weights as ``workloads.conv_nhwc_reference`` makes them (op ``i``'s of seed
``seed + i``), each conv through ``lax.conv_general_dilated`` on the previous op's requantised
output and the output stage; only the last op's output reaches DRAM and is checked bit for bit,
the program's total cycles against the walk.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields
from accel_dse.simulate.dram.job_files import layout_dict
from accel_spec.config import ArrayConfig
from accel_spec.vector_door import door_format

__all__ = ["conv_chain", "kept_chains", "conv_network_job", "conv_network_note", "kept_chains_note", "whole_network"]


def _runs_chains(design: ArrayConfig) -> bool:
    """Whether ``design`` can run a conv network from one program (int8, windows on chip)."""
    from perf_model.compiler.conv import conv_served

    return (not conv_served(design) and design.input_bits == 8 and design.weight_fmt.is_int
            and min(design.weight_fmt.bits, design.act_fmt.bits) >= 8)


def _linked(ops: list[Any]) -> bool:
    """Two or more requantised convs of one batch, each reading the previous one's NHWC output
    (``workloads.ops.conv_reads_output``; 1x1 pairs too, which the model keeps as GEMM chains)."""
    from workloads.ops import conv_reads_output

    return len(ops) >= 2 and all(conv_reads_output(a, b) for a, b in zip(ops, ops[1:], strict=False))


def conv_chain(design: ArrayConfig, selected: list[tuple[str, Any, int]], notes: list[str]) -> bool:
    """Whether ``selected`` runs as one conv-network program on ``design`` (module docstring); a
    chain the compiler cannot build as one program is named in ``notes`` with its reason."""
    from accel_spec.errors import ModelError

    ops = [op for _, op, _ in selected]
    if not _runs_chains(design) or not _linked(ops):
        return False
    try:
        network_program(design, ops, whole=True)  # the job runs them all: selected is its whole
    except ModelError as exc:
        notes.append(f"not one program for the convs ({exc}): each op from its own program")
        return False
    return True


def kept_chains(design: ArrayConfig, workload: Any, selected: list[tuple[str, Any, int]], scale: float,
                notes: list[str]) -> list[tuple[int, int]]:
    """The chains of convs the model keeps on chip (``perf_model.evaluator.conv_ops``: an ``out``
    conv, then ``in,out`` ones, then an ``in`` one, each reading the one before's output), as
    ``(first, last)`` indices of ``selected`` (the workload's first ops, in order), so ``simulate``
    runs each as the one program the model scored (its images scaled as a conv's: the first
    ``ceil(n * scale)``). A chain the compiler cannot build at that scale is named in ``notes`` and
    runs per op."""
    import perf_model
    from accel_spec.errors import ModelError
    from perf_model.compiler.conv_network import compile_conv_network
    from workloads.ops import conv_chain_link  # not a 1x1 pair, whose link the model keeps as GEMMs

    if not _runs_chains(design) or len(selected) < 2:
        return []
    try:
        flags = [op.on_chip for op in perf_model.evaluate(design, workload).ops]
    except ModelError:
        return []
    out: list[tuple[int, int]] = []
    start: int | None = None
    for i in range(min(len(flags), len(selected))):
        parts = set(flags[i].split(",")) if flags[i] else set()
        if "in" in parts and start is not None and conv_chain_link(selected[i - 1][1], selected[i][1]):
            if "out" not in parts:
                out.append((start, i))
                start = None
            continue
        start = i if parts == {"out"} else None
    kept = []
    for first, last in out:
        convs = scaled_convs([op for _, op, _ in selected[first:last + 1]], scale)
        try:
            if not network_program(design, convs, whole=last - first + 1 == len(selected)).on_chip:  # why not
                compile_conv_network(design, convs, [None] * (len(convs) - 1), require_on_chip=True)
        except ModelError as exc:
            notes.append(f"the chain {selected[first][0]} .. {selected[last][0]} is not one program on chip at "
                         f"scale {scale:g} ({exc}): each op from its own program")
            continue
        kept.append((first, last))
    return kept


def whole_network(design: ArrayConfig, workload: Any, selected: list[tuple[str, Any, int]], scale: float,
                  notes: list[str]) -> Any:
    """The whole workload as one conv network on ``design`` with its vector unit
    (``perf_model.compiler.conv_workload.conv_network_spec``: every matrix op a conv, every vector op
    on a link, poolings and residual adds included), or ``None`` with the reason in ``notes``."""
    from accel_spec.errors import ModelError
    from perf_model.compiler.conv_workload import conv_network_spec
    from workloads.ops import Conv2d

    if not design.vector_unit or not _runs_chains(design) or len(selected) != len(workload.ops) \
            or not any(isinstance(op, Conv2d) for op in workload.ops):
        return None
    if door_format(design.act_fmt) is not None:  # its reference is int8 (workloads.conv_nhwc_reference)
        notes.append(f"not one program for the whole network (its reference is written for int8 activations, "
                     f"not {design.act_fmt.name}): each op from its own program")
        return None
    spec = conv_network_spec(workload)
    if isinstance(spec, str):
        notes.append(f"not one program for the whole network ({spec})")
        return None
    try:
        network_program(design, scaled_convs(list(spec.convs), scale), spec)
    except ModelError as exc:
        notes.append(f"not one program for the whole network ({exc})")
        return None
    return spec


def _scaled_spec(spec: Any, images: int) -> tuple[tuple[Any, ...], ...]:
    """The links of ``spec`` with each pooling over ``images`` images (as the convs are scaled)."""
    import dataclasses

    from accel_spec.vector_isa import POOL_KINDS

    return tuple(tuple(dataclasses.replace(op, shape=(images, *op.shape[1:]), out_shape=None)
                       if op.kind in POOL_KINDS else op for op in link) for link in spec.links)


def network_program(design: ArrayConfig, convs: list[Any], spec: Any = None, *, whole: bool = False) -> Any:
    """``compile_conv_network`` of ``convs`` on ``design`` (no vector ops on the links, or those of
    ``spec``: a whole network's, ``whole_network``), kept for the few calls of one ``simulate`` (the
    chain's check, its job and its note compile it once). ``whole`` (or a ``spec``): the convs are the
    whole workload, whose input the host writes in conv 0's fastest form (``input_form``), as the
    model's one-program figure (``perf_model.compiler.network_figures``) compiles it."""
    from perf_model.compiler.conv_network import compile_conv_network

    whole = whole or spec is not None
    key = (design, tuple(convs), spec, whole)
    prog = _PROGRAMS.get(key)
    if prog is None:
        if len(_PROGRAMS) >= 8:
            _PROGRAMS.clear()
        if spec is None:
            prog = compile_conv_network(design, convs, [None] * (len(convs) - 1), input_form=whole)
        else:
            prog = compile_conv_network(design, convs, _scaled_spec(spec, convs[0].n), spec.skips, inputs=spec.inputs,
                                        input_form=True)
        _PROGRAMS[key] = prog
    return prog


_PROGRAMS: dict[tuple[Any, ...], Any] = {}


def scaled_convs(convs: list[Any], scale: float) -> list[Any]:
    """``convs`` with the first ``ceil(n * scale)`` images, as ``simulate`` scales a conv."""
    import dataclasses

    images = max(1, math.ceil(convs[0].n * scale))
    return [dataclasses.replace(op, n=images) for op in convs]


def conv_network_job(design: ArrayConfig, selected: list[tuple[str, Any, int]], seed: int, latency: int,
                     job_type: Any, *, index: int = 0, name: str = "network", scale: float = 1.0, spec: Any = None,
                     whole: bool = False) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    """The network's one job (``job_type``: ``DramJob``; op ``index`` of the program, named ``name``),
    its op entry of the meta and its image; the first ``ceil(n * scale)`` images. With ``spec``
    (``whole_network``) the convs are its, and the reference applies each link's ops
    (``workloads._int_ops``: a residual add's second operand the tensor ``spec.skips`` names) and
    reads each conv's input from the tensor ``spec.inputs`` names. ``whole``: ``selected`` is the whole
    workload (``network_program``'s).

    Raises:
        ModelError: the compiler cannot build the program (its reason).
    """
    import jax.numpy as jnp
    from jax import lax

    import perf_model
    import workloads
    from perf_model.compiler.conv import conv_weight_matrix
    from perf_model.compiler.conv_forms import form_conv, reshape_input, reshape_weights
    from workloads import int_vector_op

    convs = scaled_convs(list(spec.convs) if spec is not None else [op for _, op, _ in selected], scale)
    prog = network_program(design, convs, spec, whole=whole)
    links = _scaled_spec(spec, convs[0].n) if spec is not None else ((),) * len(convs)
    t = prog.tensors
    x = np.asarray(workloads.conv_nhwc_reference(convs[0], seed)[0]).astype(np.int64)
    steps = prog.input_steps  # the host writes the input reshaped for conv 0's form (none: as it is)
    runs = [form_conv(convs[0], steps), *convs[1:]] if steps else convs
    x0 = reshape_input(x, convs[0], steps) if steps else x
    tensors = {"a0": pack_tensor(t["a0"], x0.reshape(-1, runs[0].c_in))}
    held = [x]  # tensor k: the network's input, then conv k - 1's output after its link
    for i, op in enumerate(convs):
        h = held[spec.inputs[i]] if spec is not None else held[-1]
        w = np.asarray(workloads.conv_nhwc_reference(op, seed + i)[1]).astype(np.int64)
        wr = reshape_weights(w, op, steps) if i == 0 and steps else w
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], conv_weight_matrix(runs[i], prog.convs[i], design.rows, wr))
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(op.requant, op.c_out))
        acc = lax.conv_general_dilated(
            jnp.asarray(h, jnp.int8), jnp.asarray(w, jnp.int8), (op.stride_h, op.stride_w),
            ((op.pad_h, op.pad_h_hi), (op.pad_w, op.pad_w_hi)), rhs_dilation=(op.dilation_h, op.dilation_w),
            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=op.groups,
            preferred_element_type=jnp.int32)
        h = np.asarray(workloads.output_stage(acc, op.requant)).astype(np.int64)
        for vop in links[i]:
            args = [jnp.asarray(h, jnp.int8)]
            if vop.kind == "add":
                args.append(jnp.asarray(held[spec.skips[i]], jnp.int8))
            h = np.asarray(int_vector_op(vop.kind, dict(vop.params), *args)).astype(np.int64)
        held.append(h)
    last = len(convs) - 1
    timing = perf_model.gemm_program_cycles(design, prog, latency=latency, rate=perf_model.dram_rate(design))
    image = f"img_{index}_0"
    meta = {"name": name, "a_src": -1, "on_chip": False, "one_program": True,
            "instances": [{"chunks": [[prog.queue_base + a0 * 32, b0 - a0] for a0, b0 in prog.chunks],
                           "limit": 4 * timing.total + 10_000, "a": layout_dict(t["a0"]),
                           "c": layout_dict(t[f"c{last}"]), "image": image}]}
    pixels = convs[-1].n * convs[-1].out_h * convs[-1].out_w  # every image's, in the output tensor's rows
    full = selected[0][1].n
    job = job_type(index, name, SimpleNamespace(m=pixels, k=convs[0].c_in, n=convs[-1].c_out),
                   {"m": full * convs[-1].out_h * convs[-1].out_w, "batch": full} if convs[0].n != full else None,
                   h.reshape(1, pixels, convs[-1].c_out), t[f"c{last}"], timing.compute, timing.total, timing.stall,
                   len(prog.runs), design.input_bits, conv=True)
    return job, meta, {image: program_image(prog, tensors)}


def conv_network_note(design: ArrayConfig, selected: list[tuple[str, Any, int]], scale: float = 1.0,
                      spec: Any = None) -> str:
    """The note saying how the one program keeps the convs' activations."""
    from perf_model.compiler.conv_forms import describe

    convs = scaled_convs(list(spec.convs) if spec is not None else [op for _, op, _ in selected], scale)
    prog = network_program(design, convs, spec, whole=True)
    how = ("each output kept in the ifmap as the next conv's NHWC input (MOVE, the next window reads it in place, "
           "pads made on chip)" if prog.on_chip else
           "links through DRAM, as the ifmap cannot hold the tensors beside the bands (each output stored, the next "
           "conv loads its bands from it)" if not prog.kept else
           f"{prog.links}: a kept tensor stays in the ifmap as its readers' NHWC input (MOVE), the others are "
           "stored and their readers load their bands from them")
    ops = sum(len(link) for link in spec.links) if spec is not None else 0
    between = f" and {ops} vector op(s) on their links (the vector unit; no host step between ops)" if ops else ""
    form = (f"; the host writes the input reshaped for conv 0 ({describe(convs[0], prog.input_steps)})"
            if prog.input_steps else "")
    return (f"one program for the whole network: {len(convs)} convs{between}, {how}; {len(prog.chunks)} "
            f"queue-load(s){form}; only the network's output is read back")


def kept_chains_note(selected: list[tuple[str, Any, int]], chains: list[tuple[int, int]]) -> str:
    """The note naming the chains run from one program each."""
    names = "; ".join(" -> ".join(n for n, _, _ in selected[a:b + 1]) for a, b in chains)
    return (f"{len(chains)} chain(s) of convs kept on chip as the model scores them, each from one program "
            f"(each output MOVEd into the ifmap as the next conv's NHWC input; only the chain's last output is read "
            f"back, in an op named by its convs): {names}")

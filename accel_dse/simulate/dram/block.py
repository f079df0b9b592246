"""What the transformer blocks run from ONE program share in ``simulate`` (DRAM path): recognising the
workload as a block and compiling its program once, the read-back span of the tensors it writes,
``K^T`` as the program lays it out, and the job of the one program.

``accel_dse.simulate.dram.encoder`` (encoder layers) and ``accel_dse.simulate.dram.decoder`` (a
LLaMA decoder block) give the references, the image's tensors and the note.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import pack_tensor, program_image
from accel_dse.simulate.dram.job_files import layout_dict
from accel_spec.config import ArrayConfig

__all__ = ["block_program", "block_for", "block_job", "spread_keys", "tensor_span"]


@functools.lru_cache(maxsize=4)
def block_program(design: ArrayConfig, block: Any) -> Any:
    """The one program of ``block`` (an ``EncoderLayer`` or a ``DecoderBlock``) on ``design``, compiled
    once for the few calls of one ``simulate`` (the check, the job and the note), as
    ``_dram_conv_network.network_program``."""
    from perf_model.compiler.blocks import compile_block

    return compile_block(design, block)


def block_for(design: ArrayConfig, wl: Any, scale: float, notes: list[str], what: str,
              recognise: Callable[[Any], Any]) -> Any:
    """The workload as ``what`` (``recognise``: e.g. ``encoder_layer``) run from one program on
    ``design``, or ``None`` (with the reason in ``notes`` when it is one the design cannot run so)."""
    from accel_spec.config import Dataflow
    from accel_spec.errors import ModelError

    if not design.vector_unit or not wl.vector_ops or design.dataflow is not Dataflow.WS:
        return None
    try:
        block = recognise(wl)
    except ModelError:
        return None  # not such a block: the other paths say what they run
    if scale != 1:
        noun = what.split()[-1]
        notes.append(f"not one program for the {what} (scale {scale:g}: the {noun} runs whole, at scale 1): "
                     "each op from its own program")
        return None
    from perf_model.compiler.dram_space import program_dram_reason

    try:
        reason = program_dram_reason(wl.ops, design.input_bits, "outputs")  # before compiling (minutes)
        if reason:
            raise ModelError(reason)
        block_program(design, block)
    except ModelError as exc:
        notes.append(f"not one program for the {what} ({exc}): each op from its own program")
        return None
    return block


def block_job(design: ArrayConfig, prog: Any, tensors: dict[str, np.ndarray], final: dict[str, np.ndarray],
              first: str, latency: int, job_type: Any, *, poke_all: bool = False) -> tuple[Any, dict[str, Any],
                                                                                           dict[str, np.ndarray]]:
    """The one program's job (``job_type``: ``DramJob``), its op entry of the meta and its image:
    ``tensors`` packed into the image, ``final`` checked from ``first`` on (:func:`tensor_span`);
    ``poke_all``: the span is loaded with the image too (it holds host-written rows, a KV cache's)."""
    import perf_model

    t = prog.tensors
    timing = perf_model.gemm_program_cycles(design, prog, latency=latency, rate=perf_model.dram_rate(design))
    span, expected = tensor_span(t, final, first)
    image = program_image(prog, tensors)
    instance = {"chunks": [[prog.queue_base + a0 * 32, b0 - a0] for a0, b0 in prog.chunks],
                "limit": 4 * timing.total + 10_000, "a": layout_dict(t["x"]), "c": layout_dict(span)}
    if poke_all:
        instance["poke_ranges"] = [[0, len(image)]]
    meta = {"name": "network", "a_src": -1, "on_chip": False, "one_program": True, "instances": [instance]}
    m, d_model = final["out"].shape
    job = job_type(0, "network", SimpleNamespace(m=m, k=d_model, n=d_model), None, expected, span, timing.compute,
                   timing.total, timing.stall, len(prog.runs), design.input_bits)
    return job, meta, {"img_0_0": image}


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

"""The SoC part of an export: the AXI top's Verilog, the register map (C header, Markdown), the
command format, and the cases the standalone AXI testbench (``tb_axi.py``) runs.

``axi_cases.json``: per case the GEMM (two), or a requantised 3x3 conv run from its NHWC
activations with windows built on chip (``kind: conv``, on a design that builds windows), its DRAM
image (base64, from the compiler and ``accel_dse.simulate.dram.image``), the queue-loads
(``[base, commands]``), where C lies (``TensorLayout`` fields) and the expected C (numpy ``A @ B``,
or its requantisation; the conv's from ``lax.conv_general_dilated`` and the output stage), plus the
model's total cycles for the DRAM model of ``simulate`` with that model's latency
(``model_dram_latency``; the testbench's RAM has other timing, so there only the data and the
compute cycles are checked and the total is reported beside the model's).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig

__all__ = ["soc_files", "commands_markdown", "SOC_STANDALONE_FILES"]

#: Standalone files of the SoC testbench.
SOC_STANDALONE_FILES = ("tb_axi.py",)


def commands_markdown() -> str:
    """``commands.md``: the command encoding, from :mod:`accel_spec.isa` (its docstring and fields)."""
    from accel_spec import isa

    lines = ["# Command format", "", "Generated from `accel_spec.isa`.", "", "```text",
             (isa.__doc__ or "").strip(), "```", "", "| field | lsb | width |", "|---|---|---|"]
    lines += [f"| `{name}` | {lsb} | {width} |" for name, (lsb, width) in isa.FIELDS.items()]
    lines += ["", "| opcode | value |", "|---|---|"]
    lines += [f"| `{name}` | {getattr(isa.Opcode, name)} |" for name in ("LOAD", "STORE", "RUN", "SYNC")]
    lines += ["", "| error code | meaning |", "|---|---|"]
    lines += [f"| {code} | {text} |" for code, text in isa.ERROR_NAMES.items()]
    return "\n".join(lines) + "\n"


def _cases(config: ArrayConfig, seed: int) -> list[dict[str, Any]]:
    import perf_model
    from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image
    from accel_dse.simulate.dram.job_files import layout_dict
    from accel_spec.isa import DRAM_LATENCY
    from workloads import Gemm

    r, c = config.rows, config.cols
    lo, hi = -(1 << (config.input_bits - 1)), (1 << (config.input_bits - 1)) - 1
    rng = np.random.default_rng(seed)
    out = []
    for m, k, n, requant in ((2 * r + 1, 3 * r + 2, 2 * c + 1, False), (r + 3, 2 * r + 1, c + 2, True)):
        try:
            program = perf_model.compile_gemm(config, Gemm(m=m, k=k, n=n), requant=requant)
        except Exception:  # noqa: BLE001 - a design whose buffers cannot hold this case skips it
            continue
        a = rng.integers(lo, hi + 1, (m, k))
        b = rng.integers(lo, hi + 1, (k, n))
        acc = a @ b
        tensors = {"a": pack_tensor(program.tensors["a"], a), "b": pack_tensor(program.tensors["b"], b)}
        if requant:
            # One multiplier/shift for every channel, a bias per channel: y = round((acc + bias) / 2**s)
            shift = max(0, int(np.abs(acc).max()).bit_length() - config.input_bits + 1)
            bias = rng.integers(-100, 101, n)
            fields = [(int(bias[j]), 1 << 30, shift, 0, lo, hi) for j in range(n)]
            tensors["q"] = pack_qparam_lanes(program.tensors["q"], fields)
            x = acc + bias[None, :]
            expected = np.clip((x * (1 << 30) + (1 << (30 + shift))) >> (31 + shift), lo, hi)
        else:
            expected = acc
        image = program_image(program, tensors)
        timing = perf_model.gemm_program_cycles(config, program, latency=DRAM_LATENCY)
        out.append({
            "m": m, "k": k, "n": n, "requant": requant,
            "chunks": [[program.queue_base + s * 32, e - s] for s, e in program.chunks],
            "c": layout_dict(program.tensors["c"]), "image": base64.b64encode(image.tobytes()).decode("ascii"),
            "expected": expected.astype(np.int64).tolist(),
            "model_total_cycles": timing.total, "model_compute_cycles": timing.compute,
            "model_dram_latency": DRAM_LATENCY,
        })
    conv = _conv_case(config, seed)
    if conv is not None:
        out.append(conv)
    return out


def _conv_case(config: ArrayConfig, seed: int) -> dict[str, Any] | None:
    """A requantised 3x3 conv from its NHWC activations, windows built on chip (``simulate``'s conv
    program and image), or ``None`` on a design that builds no windows or cannot hold it."""
    from accel_dse.simulate.dram.conv import conv_instances
    from accel_dse.simulate.dram.job_files import layout_dict
    from accel_spec.errors import AccelDseError
    from accel_spec.isa import DRAM_LATENCY
    from perf_model.compiler.conv import conv_served
    from workloads.ops import Conv2d, Requant

    if conv_served(config) or not config.weight_fmt.is_int:
        return None
    bits = config.input_bits
    rq = Requant(multiplier=((1 << 30) + 12345,), shift=(9,), zero_point=0, bits=bits)
    conv = Conv2d(n=1, h=5, w=5, c_in=config.rows + 1, c_out=config.cols + 1, kh=3, kw=3, pad_h=1, pad_w=1,
                  requant=rq, name="conv3x3")
    try:
        program, timing, expected, images, gemm = conv_instances(config, conv.name, conv, seed, 1.0, DRAM_LATENCY)
    except AccelDseError:  # a design whose buffers cannot hold this case skips it
        return None
    return {"kind": "conv", "m": gemm.m, "k": gemm.k, "n": gemm.n, "requant": True,
            "conv": {"h": conv.h, "w": conv.w, "c_in": conv.c_in, "c_out": conv.c_out, "kh": 3, "kw": 3, "pad": 1},
            "chunks": [[program.queue_base + s * 32, e - s] for s, e in program.chunks],
            "c": layout_dict(program.tensors["c"]), "image": base64.b64encode(images[0].tobytes()).decode("ascii"),
            "expected": expected[0].astype(np.int64).tolist(),
            "model_total_cycles": timing.total, "model_compute_cycles": timing.compute,
            "model_dram_latency": DRAM_LATENCY}


def soc_files(config: ArrayConfig, *, seed: int = 7) -> list[tuple[str, str]]:
    """``(name, text)`` of the SoC part of the export (module docstring), Verilog first."""
    import rtl_gen

    top = rtl_gen.system_name(config)
    regs = {reg.name: reg.offset for reg in rtl_gen.CONTROL_REGMAP}
    system = rtl_gen.AxiAccelerator(config)
    ports = [{"name": name, "width": len(getattr(system, name))} for name in system.signature.members]
    for unit in (system, system.core, system.csr):
        unit._MustUse__silence = True  # type: ignore[attr-defined]  # only the signature is needed here
    cases = {"top": top, "verilog": f"{top}.v", "data_bytes": system.data_bytes, "regs": regs,
             "ports": [{"name": "clk", "width": 1}, {"name": "rst", "width": 1}, *ports],
             "cases": _cases(config, seed)}
    return [
        (f"{top}.v", rtl_gen.system_verilog(config)),
        ("regs.h", rtl_gen.c_header(rtl_gen.CONTROL_REGMAP, "ACCEL")),
        ("registers.md", rtl_gen.markdown_table(rtl_gen.CONTROL_REGMAP)),
        ("commands.md", commands_markdown()),
        ("axi_cases.json", json.dumps(cases, indent=1) + "\n"),
    ]

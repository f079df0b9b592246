"""evaluate and the sweep's vectorised model score a conv the way the compiler runs it.

On a design that builds windows (``perf_model.evaluator.conv_ops``): the path ``simulate`` takes
(``conv_path``), the cycles of its program walk (one program, all its images), the bytes of its transfers;
on the host's path, the im2col GEMM's figures. ``evaluate_designs`` equals ``evaluate``.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from model_testlib import transfer_word_bytes

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import compile_conv
from perf_model.compiler.conv_score import conv_form
from perf_model.compiler.scorers import conv_path
from workloads.ops import Conv2d, Gemm, Requant, Workload

REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))


def _design(rng: random.Random) -> ArrayConfig:
    return ArrayConfig(rows=rng.choice([2, 4, 8, 16]), cols=rng.choice([2, 4, 8]), dataflow="ws",
                       ifmap_sram_kib=rng.choice([1, 2, 8]), weight_sram_kib=rng.choice([1, 4]),
                       ofmap_sram_kib=rng.choice([2, 8]), double_buffered=rng.random() < 0.5,
                       shadow_stationary=rng.random() < 0.5, dram_bytes_per_cycle=rng.choice([2.0, 8.0, 64.0]))


def _conv(rng: random.Random) -> Conv2d:
    kh, kw = rng.choice([1, 3, 5]), rng.choice([1, 3])
    groups = rng.choice([1, 1, 1, 2, 4])
    dil = rng.choice([1, 1, 2])
    return Conv2d(n=rng.choice([1, 2, 3]), h=rng.randint(dil * (kh - 1) + 1, 14), w=rng.randint(dil * (kw - 1) + 1, 14),
                  c_in=groups * rng.randint(1, 9), c_out=groups * rng.randint(1, 9), kh=kh, kw=kw,
                  stride_h=rng.randint(1, 2), stride_w=rng.randint(1, 2), pad_h=rng.randint(0, kh // 2),
                  pad_w=rng.randint(0, kw // 2), pad_h_hi=rng.randint(0, kh // 2), dilation_h=dil, dilation_w=dil,
                  groups=groups, requant=REQUANT if rng.random() < 0.4 else None, name="c")


def _transfers(config: ArrayConfig, program) -> tuple[int, int]:
    """DRAM bytes read (bands, weights) and written by a program, counted from its commands here."""
    read = written = 0
    for c in program.commands:
        if c.opcode == Opcode.LOAD and c["buffer"] != Buffer.QPARAM:
            read += c["rows"] * c["words"] * transfer_word_bytes(config, c)
        elif c.opcode == Opcode.STORE:
            written += c["rows"] * c["words"] * transfer_word_bytes(config, c)
    return read, written


def test_evaluate_scores_a_conv_as_its_program_runs_on_random_shapes_and_designs():
    rng = random.Random(27)
    chip = host = infeasible = reshaped = 0
    designs = set()
    while chip < 60 or host < 8:
        config, conv = _design(rng), _conv(rng)
        count = rng.choice([1, 2])
        requant = conv.requant is not None
        path, why = conv_path(config, conv, requant=requant)
        result = perf_model.evaluate(config, Workload(name="w", ops=(conv,), counts=(count,))).ops[0]
        gemm = conv.to_gemm()
        im2col = perf_model.evaluate(config, Workload(name="w", ops=(gemm,), counts=(count,))).ops[0]
        where = f"{config} {conv} x{count}: {path} {why}"
        assert result.conv_path == path, where
        if path == "infeasible":
            infeasible += 1
            assert result.status == "infeasible" and result.reason == why and "'c'" not in why, where
            continue
        if path == "host":
            host += 1
            assert result.conv_note == why and result.total_cycles == im2col.total_cycles, where
            assert result.dram_read_bytes == im2col.dram_read_bytes, where
            assert im2col.status == "ok" and why.startswith("c: the host's im2col GEMM takes"), where
            continue
        chip += 1
        designs.add(config)
        # all the conv's images in one program, of the conv or its space-to-depth form (the faster)
        program = compile_conv(config, conv_form(config, conv, requant), requant=requant)
        reshaped += result.conv_note.startswith("space-to-depth")
        walk = perf_model.gemm_program_cycles(config, program, rate=perf_model.dram_rate(config))
        read, written = _transfers(config, program)
        images = count
        assert result.status == "ok", where
        assert result.total_cycles == walk.total * images and result.compute_cycles == walk.compute * images, where
        assert (result.dram_read_bytes, result.dram_write_bytes) == (read * images, written * images), where
        assert result.macs == im2col.macs and result.utilization > 0, where
        if im2col.status == "ok":  # the model chose the faster path, or the fewer bytes within 1 %
            chip_bytes = read + written
            host_bytes = (im2col.dram_read_bytes + im2col.dram_write_bytes) / count
            assert (walk.total <= im2col.total_cycles / count
                    or (walk.total <= 1.01 * im2col.total_cycles / count and chip_bytes <= host_bytes)), where
    assert len(designs) >= 20 and infeasible >= 1 and reshaped >= 2, (len(designs), infeasible, reshaped)


def test_evaluate_designs_equals_evaluate_on_convs():
    rng = random.Random(5)
    ops = (Conv2d(n=1, h=12, w=12, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, name="c3"),
           Conv2d(n=2, h=14, w=10, c_in=24, c_out=8, kh=5, kw=3, stride_h=2, pad_h=2, pad_w=1, pad_w_hi=0,
                  requant=REQUANT, name="c5"),
           Conv2d(n=1, h=12, w=12, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, groups=16, name="dw"),
           Conv2d(n=1, h=10, w=10, c_in=32, c_out=12, kh=1, kw=1, name="pw"),
           Conv2d(n=1, h=13, w=13, c_in=12, c_out=20, kh=3, kw=3, dilation_h=2, dilation_w=2, pad_h=2, pad_w=2,
                  groups=4, name="dil"),
           Gemm(m=9, k=20, n=7, name="fc"))
    wl = Workload(name="convs", ops=ops, counts=(1, 2, 1, 1, 1, 1))
    configs = [_design(rng) for _ in range(12)]
    configs += [dataclasses.replace(configs[0], dataflow="os"), dataclasses.replace(configs[1], dataflow="is")]
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(configs), wl)
    chip = 0
    for i, config in enumerate(configs):
        one = perf_model.evaluate(config, wl)
        chip += sum(op.conv_path == "chip" for op in one.ops)
        assert bool(table.feasible[i]) == (one.status == "ok"), (config, one.reason)
        assert table.reason[i] == one.reason
        if one.status != "ok":
            continue
        for key in ("total_cycles", "compute_cycles", "dram_read_bytes", "dram_write_bytes", "energy_pj"):
            assert np.isclose(getattr(table, key)[i], one.total[key], rtol=1e-12), (key, config)
    assert chip >= 12, chip


def test_a_conv_that_does_not_fit_on_chip_is_infeasible_in_evaluate_and_the_sweep():
    conv = Conv2d(n=1, h=8, w=600, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, name="wide")
    config = ArrayConfig(rows=4, cols=4, dataflow="ws", ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    wl = Workload(name="w", ops=(conv,), counts=(1,))
    result = perf_model.evaluate(config, wl)
    assert result.status == "infeasible" and "wide" in result.reason and "1800 ifmap words" in result.reason
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), wl)
    assert not table.feasible[0] and table.reason[0] == result.reason


@pytest.mark.parametrize("dataflow", ["os", "is"])
def test_a_design_that_builds_no_windows_scores_the_im2col_gemm_and_says_why(dataflow):
    conv = Conv2d(n=2, h=8, w=8, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, name="k")
    config = ArrayConfig(rows=4, cols=4, dataflow=dataflow)
    result = perf_model.evaluate_op(config, conv)
    im2col = perf_model.evaluate_op(config, conv.to_gemm())
    assert result.total_cycles == im2col.total_cycles and result.dram_read_bytes == im2col.dram_read_bytes
    assert result.conv_path == "host" and "weight-stationary designs only" in result.conv_note
    assert dataflow.upper() in result.conv_note and result.to_dict()["conv_note"] == result.conv_note

"""accel-dse simulate end to end: generated Verilog in Icarus/Verilator against JAX, with cycles.

Every simulation runs through cocotb's Python runner. Expected values come from outside the
code under test: JAX (``workloads.reference``) for the data, the timing contract written out
by hand for single-run cycles, and buffer sizes worked out by hand to know when a GEMM must be
split into several runs. CI cost: Icarus for most cases (sub-second builds) and exactly one
Verilator build (the 4x4 WS ``tiny`` preset), cached for the session in ``sim_cache``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.perf_model.model_testlib import hand_run_cycles

TINY = load_design("tiny")  # 4x4 WS, ifmap/weight 4 KiB, ofmap 8 KiB, int8, acc 32


def tiny(df: str):
    return dataclasses.replace(TINY, dataflow=df)


def run_cycles_by_hand(df: str, r: int, c: int, m: int, k: int, n: int) -> int:
    """perf_model.timing's contract written out (tests/perf_model's by-hand formula), for the
    presets' shadow registers."""
    return hand_run_cycles({"ws": 0, "os": 1, "is": 2}[df], r, c, m, k, n, True)


def assert_all_pass(report):
    for op in report.ops:
        assert op.status == "pass", (op.name, op.reason)
        assert op.mismatches == 0
        assert op.cycles_rtl == op.cycles_model and op.cycles_match
        assert op.sim_seconds > 0 and op.sim_cycles >= op.cycles_rtl
    assert report.passed


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_single_run_gemm_is_exact_in_icarus(df, sim_cache):
    m, k, n = 9, 7, 6  # edge folds along every mapped dimension of a 4x4 array
    report = simulate(tiny(df), f"gemm:m={m},k={k},n={n}", simulator="icarus", work_dir=sim_cache)
    assert_all_pass(report)
    (op,) = report.ops
    assert op.tiles == 1
    assert op.cycles_rtl == run_cycles_by_hand(df, 4, 4, m, k, n)


def test_int16_operands_with_a_48_bit_accumulator(sim_cache):
    design = dataclasses.replace(TINY, dataflow="os", input_bits=16, acc_bits=48)
    report = simulate(design, "gemm:m=6,k=9,n=5", simulator="icarus", work_dir=sim_cache)
    assert_all_pass(report)
    assert report.ops[0].cycles_rtl == run_cycles_by_hand("os", 4, 4, 6, 9, 5)


@pytest.mark.parametrize("df", ["ws", "os"])
def test_multi_tile_gemm_accumulates_across_k_runs(df, sim_cache):
    m, k, n = 12, 600, 9
    # By hand: the 4 KiB weight buffer holds 4096 * 8 / (4 lanes * 8 bits) = 1024 words, and
    # K * ceil(N / C) = 600 * 3 = 1800 weight words do not fit, whatever M: K must be split,
    # so runs accumulate partial sums in the ofmap buffer.
    assert k * math.ceil(n / 4) > 4 * 8192 // (4 * 8)
    # WS is tiny itself: on the session's flat Verilator build of tiny (the CLI run below); OS in Icarus
    report = simulate(tiny(df), f"gemm:m={m},k={k},n={n}", simulator="verilator" if df == "ws" else "icarus",
                      work_dir=sim_cache)
    assert_all_pass(report)
    assert report.ops[0].tiles >= 2


def test_conv_and_attention_ops(sim_cache):
    # tiny itself in Verilator: the flat build of tiny the session shares (the CLI run below, the sampled
    # and conv tests); in Icarus, 4 x 576 x 128 on the 4 x 4 array is most of this test's CPU time
    conv = simulate(tiny("ws"), "resnet18:res=16", ops=["layer2.0.conv1"], scale=0.1,
                    simulator="verilator", work_dir=sim_cache)
    assert_all_pass(conv)
    (op,) = conv.ops
    # layer2.0.conv1 at 16x16: 64 -> 128 channels, 3x3 stride 2 on 4x4 -> 2x2 outputs: m = 4,
    # k = 9 taps x 16 channel words x 4 lanes = 576, n = 128. The model runs it on chip (windows from
    # NHWC in DRAM), whole images: scale 0.1 keeps ceil(0.1) = 1 image of the batch of 1.
    assert any(note.startswith("1 conv op(s) run from NHWC activations in DRAM") for note in conv.notes), conv.notes
    assert op.gemm == {"m": 4, "k": 576, "n": 128, "batch": 1}

    attention = simulate(tiny("os"), "bert_base:seq=16", ops=["attention/scores"], scale=0.25,
                         simulator="icarus", work_dir=sim_cache)
    assert_all_pass(attention)
    (op,) = attention.ops
    # 12 heads of Q K^T: 16 x 64 x 16 each; scale 0.25 -> 4 rows, 3 heads (one GEMM each)
    assert op.gemm == {"m": 4, "k": 64, "n": 16, "batch": 3}
    assert op.cycles_rtl == 3 * run_cycles_by_hand("os", 4, 4, 4, 64, 16)


def test_mlp_end_to_end_in_verilator_via_the_cli(run_cli, sim_cache):
    spec = "mlp:batch=6,d_in=24,hidden=20,layers=2,d_out=5"
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", spec, "--json",
                             "--work-dir", str(sim_cache))
    assert code == 0, err
    report = json.loads(out)
    assert report["simulator"] == "verilator" and report["passed"] is True
    assert report["workload"] == spec and report["design"]["rows"] == 4
    assert [op["name"] for op in report["ops"]] == ["fc.0", "fc.1", "fc.2"]
    dims = [(op["gemm"]["m"], op["gemm"]["k"], op["gemm"]["n"]) for op in report["ops"]]
    assert dims == [(6, 24, 20), (6, 20, 20), (6, 20, 5)]
    for op in report["ops"]:
        assert op["status"] == "pass" and op["mismatches"]["count"] == 0
        assert op["cycles_rtl"] == op["cycles_model"] and op["cycles_match"] is True
        m, k, n = op["gemm"]["m"], op["gemm"]["k"], op["gemm"]["n"]
        assert op["cycles_rtl"] == run_cycles_by_hand("ws", 4, 4, m, k, n)  # each layer fits one run
        assert op["cycles_per_second"] > 0
        assert op["total_cycles_match"] is True  # from DRAM: the whole SoC block's counter
    # Only the top's ports are public to cocotb (no --public-flat-rw): the .vlt names exactly
    # the simulation top's signature (registers, interrupt, DRAM backdoor) plus clock and reset.
    import re

    import rtl_gen

    top = report["design"]["top"]
    # The build cache is shared by the session's simulation tests (all workers): other tests may
    # have built this top for other DRAM sizes; every finished build names the same ports.
    vlts = sorted(p for p in sim_cache.glob(f"builds/{top}-verilator-*/{top}.vlt")
                  if (p.parent / "build.json").is_file())
    assert vlts
    system = rtl_gen.SimSystem(TINY, latency=20, dram_words=2)
    for unit in (system, system.soc, system.soc.core, system.soc.csr, system.dram):
        unit._MustUse__silence = True  # only the signature is wanted, never elaborated
    for vlt in vlts:
        public = set(re.findall(r'-module "' + top + r'" -var "([^"]+)"', vlt.read_text()))
        assert public == set(system.signature.members) | {"clk", "rst"}, vlt


def test_fault_injected_design_is_caught(run_cli, sim_cache):
    row, col = 1, 2
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8",
                             "--simulator", "icarus", "--inject-fault", f"{row},{col},0,1", "--json",
                             "--work-dir", str(sim_cache))
    assert code == 1, err
    report = json.loads(out)
    assert report["passed"] is False
    (op,) = report["ops"]
    assert op["status"] == "fail" and op["mismatches"]["count"] > 0
    # WS: PE (r, c) holds B[kf*R + r, nf*C + c], so a broken PE can only corrupt output
    # columns n with n % C == c; every listed mismatch must be one of them and really differ.
    for entry in op["mismatches"]["first"]:
        _, _, n = entry["index"]
        assert n % 4 == col
        assert entry["got"] != entry["expected"]
    # and the expected values listed are JAX's
    import workloads

    ref = workloads.reference(workloads.Gemm(m=8, k=8, n=8), 0)
    want = np.asarray(ref.c)
    for entry in op["mismatches"]["first"]:
        _, i, j = entry["index"]
        assert entry["expected"] == int(want[i, j])


def test_a_run_that_never_finishes_fails_its_op_and_the_next_op_still_runs(monkeypatch, sim_cache):
    from accel_dse.simulate.host import driver as _host_driver

    calls = []

    def first_run_gets_one_cycle(run_cycles: int) -> int:
        calls.append(run_cycles)
        return 1 if len(calls) == 1 else 2 * run_cycles + 64

    monkeypatch.setattr(_host_driver, "_watchdog_cycles", first_run_gets_one_cycle)
    report = simulate(tiny("ws"), "mlp:batch=4,d_in=8,hidden=8,layers=1,d_out=4", simulator="icarus",
                      work_dir=sim_cache, chain=False, memory="host")
    first, second = report.ops
    assert first.status == "error" and "done did not rise within 1 cycles" in first.reason
    assert first.cycles_rtl is None and not first.cycles_match
    assert second.status == "pass" and second.cycles_rtl == run_cycles_by_hand("ws", 4, 4, 4, 8, 4)
    assert not report.passed

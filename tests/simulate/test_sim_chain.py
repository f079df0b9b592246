"""Chained int8 networks in the simulator: each op's input is the requantised output the design read back.

Expected values are computed here from the documented output-stage arithmetic on Python
integers (not from the code under test); the operands come from ``workloads.reference``.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_dse.simulate.host.driver import _prepare
from accel_spec.errors import SimulationError
from workloads import Gemm, Requant, Workload

TINY = load_design("tiny")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _layer(name: str, m: int, k: int, n: int, seed: int, relu: bool) -> Gemm:
    rng = np.random.default_rng(seed)
    rq = Requant(multiplier=tuple(int(v) for v in rng.integers(1 << 30, 1 << 31, n)),
                 shift=tuple(int(v) for v in rng.integers(6, 10, n)),
                 bias=tuple(int(v) for v in rng.integers(-3000, 3000, n)),
                 zero_point=-3, act_min=-3 if relu else -128, act_max=127)
    return Gemm(m=m, k=k, n=n, name=name, requant=rq)


NET = Workload(name="net", ops=(
    _layer("l0", 7, 13, 11, 1, True), _layer("l1", 7, 11, 9, 2, True), _layer("l2", 7, 9, 6, 3, False),
))


def _spec_network(ops, seed: int) -> list[np.ndarray]:
    """The network on Python integers: x = clamp(acc + bias), y = (x*M + 2^(30+s)) >> (31+s), clamp(y + zp)."""
    a = workloads.reference(ops[0], seed).a.astype(np.int64)
    outs = []
    for i, op in enumerate(ops):
        b = workloads.reference(op, seed + i).b.astype(np.int64)
        acc = a @ b
        rq = op.requant
        q = np.zeros_like(acc)
        for (r, c), v in np.ndenumerate(acc):
            x = max(min(int(v) + rq.bias[c], INT32_MAX), INT32_MIN)
            s = rq.shift[c]
            y = (x * rq.multiplier[c] + (1 << (30 + s))) >> (31 + s)
            q[r, c] = min(max(y + rq.zero_point, rq.act_min), rq.act_max)
        outs.append(q)
        a = q
    return outs


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_three_layer_int8_network_on_a_non_square_array_is_bit_exact(df, sim_cache):
    design = dataclasses.replace(TINY, rows=3, cols=5, dataflow=df)
    report = simulate(design, NET, simulator="icarus", work_dir=sim_cache)
    for op in report.ops:
        assert op.status == "pass", (op.name, op.reason)
        assert op.output_bits == 8 and op.mismatches == 0 and op.raw_mismatches == 0
        assert op.cycles_rtl == op.cycles_model
    net = report.network
    assert net is not None and net["chained"] and net["passed"] and net["ops"] == 3
    assert net["final_output"] == {"op": "l2", "elements": 42, "bits": 8, "mismatches": 0, "match": True}
    # the values the design was checked against are the network's, computed here independently
    final = _spec_network(NET.ops, 0)[-1]
    ref = workloads.chained_references(NET.ops, 0)[-1].q
    assert np.array_equal(final, ref) and len(np.unique(final)) > 5


def test_chained_inputs_come_from_the_design_not_the_program():
    design = dataclasses.replace(TINY, rows=3, cols=5)
    selected = [(op.name, op, 1) for op in NET.ops]
    _, chained = _prepare(design, selected, 1.0, 0, True)
    _, independent = _prepare(design, selected, 1.0, 0, False)
    src = chained.column("a_src")
    assert src[chained.column("op") == 0].tolist() == [-1] * int((chained.column("op") == 0).sum())
    assert (src[chained.column("op") > 0] == chained.column("op")[chained.column("op") > 0] - 1).all()
    # only the first op's inputs travel in the program; the others are the read-back outputs
    first = int(chained.column("if_cnt")[chained.column("op") == 0].sum())
    assert len(chained.ifmap_words) == first < len(independent.ifmap_words)


def test_fault_injected_network_fails_every_check(run_cli, sim_cache):
    """On the host port both the requantised outputs and the raw accumulators are read back."""
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "mlp:batch=6,d_in=24,hidden=20,layers=2,"
                             "d_out=5", "--simulator", "icarus", "--inject-fault", "1,2,0,1", "--json", "--host-port",
                             "--work-dir", str(sim_cache))
    assert code == 1, err
    report = json.loads(out)
    assert report["passed"] is False and report["network"]["passed"] is False
    for op in report["ops"]:
        assert op["status"] == "fail" and op["raw_mismatches"] > 0, op["name"]


def test_chain_on_ops_that_do_not_chain_is_an_error():
    ops = Workload(name="x", ops=(NET.ops[0], NET.ops[2]))
    with pytest.raises(SimulationError, match="do not chain"):
        simulate(TINY, ops, chain=True, simulator="icarus")


def test_no_chain_runs_requantised_ops_on_their_own_data(run_cli, sim_cache):
    spec = "mlp:batch=3,d_in=8,hidden=12,layers=1,d_out=4"
    # tiny itself: on the flat Verilator build of tiny the session builds anyway (test_sim_conv, test_sim_end_to_end)
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", spec, "--simulator", "verilator",
                             "--no-chain", "--json", "--work-dir", str(sim_cache))
    assert code == 0, err
    report = json.loads(out)
    assert report["network"] is None and report["passed"] is True
    assert [op["output_bits"] for op in report["ops"]] == [8, 8]
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", spec, "--simulator", "verilator",
                             "--work-dir", str(sim_cache))
    assert code == 0, err
    assert "network: 2 chained ops, passed; final output fc.1 (12 x 8-bit) matches JAX" in out


@pytest.mark.parametrize("reuse", [True, False])
def test_a_square_ws_array_keeps_the_network_on_chip_from_dram_bit_exact_in_the_models_cycles(reuse, sim_cache):
    # tiny itself: on the flat Verilator build of tiny the session builds anyway (test_sim_conv, test_sim_end_to_end)
    report = simulate(TINY, NET, simulator="verilator", work_dir=sim_cache, reuse=reuse)
    assert [op.on_chip for op in report.ops] == ([True, True, False] if reuse else [False, False, False])
    for op in report.ops:
        assert op.status == "pass", (op.name, op.reason)
        assert op.total_cycles_match and op.cycles_total_rtl == op.cycles_total_model
    assert report.network is not None and report.network["passed"]
    assert report.network["final_output"]["mismatches"] == 0 and report.network["final_output"]["match"]
    assert any("on-chip reuse: 2 of 2 link(s)" in note for note in report.notes) == reuse

"""``evaluate`` says what bounds a design: the share of cycles that are compute, DRAM stall and
vector work, the largest named, in the text and in ``--json`` (``bound``)."""

from __future__ import annotations

import json

import pytest


def test_llama_decode_on_edge_is_bound_by_dram(run_cli):
    """A decode step streams every weight once for one token: the array waits for DRAM."""
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "llama_decode", "--json")
    assert code == 0, err
    data = json.loads(out)
    bound, total = data["bound"], data["total"]
    assert bound["limit"] == "DRAM bandwidth"
    assert bound["line"].startswith("bound by: DRAM bandwidth: ")
    cycles = total["compute_cycles"] + total["stall_cycles"] + total["vector_cycles"]
    assert cycles == pytest.approx(total["total_cycles"], rel=1e-9)  # the three parts are the whole
    assert bound["shares"]["dram_stall"] == pytest.approx(total["stall_cycles"] / cycles)
    assert bound["shares"]["compute"] == pytest.approx(total["compute_cycles"] / cycles)
    # the PEs while computing: MACs over 16x16 slots a compute cycle; times the compute share it is
    # the utilisation the totals give
    busy = total["macs"] / (256 * total["compute_cycles"])
    assert bound["array_busy"] == pytest.approx(busy)
    assert busy * bound["shares"]["compute"] == pytest.approx(total["utilization"], rel=1e-3)
    assert {o["name"] for o in bound["ops"]} == {op["name"] for op in data["ops"]}
    for o, op in zip(bound["ops"], data["ops"], strict=True):
        assert o["limit"] == ("DRAM bandwidth" if op["stall_cycles"] > op["compute_cycles"] else "array")


def test_compute_bound_design_says_array(run_cli):
    code, out, err = run_cli("evaluate", "--design", "tiny", "--workload", "mlp")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("bound by: ")]
    assert len(lines) == 1 and lines[0].startswith("bound by: array: "), out
    assert out.splitlines()[1].split()[-1] == "bound"  # the per-op column


def test_host_work_is_named_not_given_a_share(run_cli):
    """A design without the vector unit leaves a transformer's softmax and norms to the host: the
    line says so rather than folding it into a share it has no cycles for."""
    code, out, err = run_cli("evaluate", "--design", "tiny", "--workload", "bert_base:seq=16,d=32,heads=2,ffn=64",
                             "--json")
    assert code == 0, err
    bound = json.loads(out)["bound"]
    assert bound["host"]["vector_ops"] > 0
    assert "host work not in these cycles" in bound["line"]
    assert sum(bound["shares"].values()) == pytest.approx(1.0)

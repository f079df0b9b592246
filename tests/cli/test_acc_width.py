"""The accumulator width checked against the workload: ``evaluate`` and ``design check --workload``
refuse a design whose ``acc_bits`` cannot hold an op's sums (exit 2, one line naming every width
the ops need, the widest first), rather than print an all-zero table and exit 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_testlib import one_line_error

#: E4M3: largest finite 448, smallest subnormal 2**-9; the fixed-point accumulator counts in units
#: of the smallest subnormal squared, so one product is at most (448 * 2**9)**2 units.
E4M3_PRODUCT = (448 * 2**9) ** 2

FP8 = """[design]
rows = 16
cols = 16
dataflow = "ws"
input_bits = 8
acc_bits = {acc}
ifmap_sram_kib = 128
weight_sram_kib = 128
ofmap_sram_kib = 128
dram_bytes_per_cycle = 8.0
clock_mhz = 800.0
weight_format = "fp8_e4m3"
act_format = "fp8_e4m3"
"""


def _need(k: int, product: int) -> int:
    """The smallest signed width holding k products: k * product <= 2**(a-1) - 1 (by search)."""
    a = 2
    while k * product > 2 ** (a - 1) - 1:
        a += 1
    return a


def _design(tmp_path, acc: int, vector_unit: bool = False):
    path = tmp_path / f"fp8_acc{acc}{'_vector' if vector_unit else ''}.toml"
    path.write_text(FP8.format(acc=acc) + ("vector_unit = true\n" if vector_unit else ""))
    return str(path)


def test_need_by_hand_matches_the_docs():
    """docs/formats.md: an fp8 sum needs 37 + log2 K bits, 49 for BERT-base's FFN down projection (K = 3072)."""
    assert _need(3072, E4M3_PRODUCT) == 49
    assert _need(768, E4M3_PRODUCT) == 47
    docs = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
    assert "(49 for BERT-base's K = 3072)" in docs.read_text()


@pytest.mark.parametrize("vector_unit", [False, True], ids=["no-unit", "vector-unit"])
def test_evaluate_refuses_fp8_acc40_on_bert_base_naming_every_op(run_cli, tmp_path, vector_unit):
    """With the vector unit too (fp8 activations reach it through its door: the design is one, the
    accumulator rule is the same)."""
    code, out, err = run_cli("evaluate", "--design", _design(tmp_path, 40, vector_unit), "--workload", "bert_base")
    line = one_line_error(code, out, err)
    # bert_base's GEMMs and their K: projections and ffn_in 768, scores 64 (head dim), context 512 (seq), ffn_out 3072
    ks = {"attention/query": 768, "attention/key": 768, "attention/value": 768, "attention/scores": 64,
          "attention/context": 512, "attention/output": 768, "ffn_in": 768, "ffn_out": 3072}
    assert f"acc_bits = 40 is too narrow for bert_base: its sums need acc_bits >= {_need(3072, E4M3_PRODUCT)}" in line
    assert "(op 'ffn_out', K = 3,072" in line
    by_width = dict(re.findall(r"(\d+) for ([^;(]+) \(K", line.split("by op: ", 1)[1]))
    named = {name.strip(): int(bits) for bits, names in by_width.items()
             for name in re.split(r", | and ", names) if name.strip()}
    assert named == {name: _need(k, E4M3_PRODUCT) for name, k in ks.items()}
    # widest first
    assert [int(b) for b in by_width] == sorted({_need(k, E4M3_PRODUCT) for k in ks.values()}, reverse=True)


def test_evaluate_names_only_the_ops_that_overflow(run_cli, tmp_path):
    code, out, err = run_cli("evaluate", "--design", _design(tmp_path, 48), "--workload", "bert_base")
    line = one_line_error(code, out, err)
    assert line.endswith("by op: 49 for ffn_out (K 3,072)")


SMALL = "bert_base:seq=16,d=32,heads=2,ffn=64"


def test_design_check_with_a_workload(run_cli, tmp_path):
    need = _need(64, E4M3_PRODUCT)  # the small model's widest K: ffn_out's 64
    code, out, err = run_cli("design", "check", _design(tmp_path, need - 1), "--workload", SMALL)
    line = one_line_error(code, out, err)
    assert f"its sums need acc_bits >= {need} (op 'ffn_out', K = 64" in line
    code, out, err = run_cli("design", "check", _design(tmp_path, need), "--workload", SMALL)
    assert code == 0, err
    assert f"# acc_bits = {need} holds {SMALL.split(':')[0]}" in out
    assert f"needs {need} bits (op 'ffn_out', K = 64)" in out
    code, out, err = run_cli("design", "check", _design(tmp_path, need - 1))  # without a workload: no check
    assert code == 0, err


def test_integer_accumulator_too_narrow(run_cli, tmp_path):
    """int8 lanes: K products of -128 * -128 = 2**14 each."""
    path = tmp_path / "int8.toml"
    path.write_text(FP8.format(acc=24).replace('weight_format = "fp8_e4m3"\nact_format = "fp8_e4m3"\n', ""))
    code, out, err = run_cli("evaluate", "--design", str(path), "--workload", "gemm:m=8,k=1024,n=8")
    line = one_line_error(code, out, err)
    assert f"need acc_bits >= {_need(1024, 2**14)} (op 'gemm', K = 1,024, int8 operands)" in line


def test_simulate_refuses_before_building_with_evaluates_line(run_cli, tmp_path):
    """``simulate`` names every overflowing op in ``evaluate``'s words and exits 2 before any build
    (the work directory is never created)."""
    design = _design(tmp_path, 40)
    work = tmp_path / "work"
    code, out, err = run_cli("evaluate", "--design", design, "--workload", "bert_base")
    evaluate_line = one_line_error(code, out, err)
    code, out, err = run_cli("simulate", "--design", design, "--workload", "bert_base", "--work-dir", str(work))
    assert one_line_error(code, out, err) == evaluate_line
    assert not work.exists()


def test_simulate_names_the_selected_ops_that_overflow(run_cli, tmp_path):
    """Only the ops simulated are checked: with --ops, the ones chosen that overflow, each with its width."""
    design = _design(tmp_path, 46)
    work = tmp_path / "work"
    code, out, err = run_cli("simulate", "--design", design, "--workload", "bert_base", "--work-dir", str(work),
                             "--ops", "attention/scores,attention/query,ffn_out")
    line = one_line_error(code, out, err)
    assert line.endswith(f"by op: {_need(3072, E4M3_PRODUCT)} for ffn_out (K 3,072); "
                         f"{_need(768, E4M3_PRODUCT)} for attention/query (K 768)")
    assert "attention/scores" not in line  # K 64 needs 43 bits: 46 hold it
    assert not work.exists()


def test_simulates_check_passes_an_accumulator_that_holds_the_ops(tmp_path):
    """At the width the ops need nothing is refused; one bit less names the widest op."""
    import workloads
    from accel_dse.acc_width import narrow_for
    from accel_dse.design_files import load_design

    ops = [(op.name, op) for op in workloads.resolve(SMALL).ops]
    need = _need(64, E4M3_PRODUCT)
    assert narrow_for(load_design(_design(tmp_path, need)), ops) == []
    short = narrow_for(load_design(_design(tmp_path, need - 1)), ops)
    assert [(n["bits"], n["ops"]) for n in short] == [(need, ["ffn_out"])]

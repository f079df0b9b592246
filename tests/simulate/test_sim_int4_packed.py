"""Packed int4 (``pack_int4``): int4 operands two a byte in DRAM, sign-extended by the DMA into the
buffers' 8-bit lanes, int4 outputs packed on the store; bit-exact against the int4 network on
Python integers, cycles == model, and half the DRAM bytes of the byte-per-element design.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.simulate.test_sim_formats import MLP, assert_chain_passes, check_int_reference

#: 4x4 with a 4-byte-a-cycle DRAM: packed words of 2 bytes on a 2-byte bus.
TINY = load_design("tiny")


@pytest.mark.parametrize(("df", "wfmt", "afmt"), [("ws", "int4", "int4"), ("os", "int4", "int8"),
                                                  ("is", "int8", "int4")])
def test_packed_int4_mlp_chain_is_bit_exact_with_model_cycles(df, wfmt, afmt, sim_cache):
    design = dataclasses.replace(TINY, dataflow=df, weight_format=wfmt, act_format=afmt, pack_int4=True)
    report = simulate(design, MLP, simulator="icarus", work_dir=sim_cache)
    assert_chain_passes(report)
    by_hand = check_int_reference(wfmt, afmt)
    if afmt == "int4":  # int4 outputs saturate at 7 (ReLU: the negative end in tests/rtl_gen)
        assert by_hand[0].max() == 7


def test_fault_injected_packed_design_fails(run_cli, sim_cache, tmp_path):
    path = tmp_path / "packed.toml"
    path.write_text('[design]\nrows = 4\ncols = 4\nweight_format = "int4"\nact_format = "int4"\npack_int4 = true\n'
                    'ifmap_sram_kib = 4\nweight_sram_kib = 4\nofmap_sram_kib = 8\n')
    code, out, err = run_cli("simulate", "--design", str(path), "--workload", MLP, "--simulator", "icarus",
                             "--inject-fault", "1,2,5,1", "--json", "--work-dir", str(sim_cache))
    assert code == 1, err
    report = json.loads(out)
    assert report["passed"] is False and report["network"]["passed"] is False


def test_pack_int4_without_an_int4_operand_is_one_line_exit_2(run_cli, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[design]\nrows = 4\ncols = 4\npack_int4 = true\n")
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "pack_int4 = true needs an int4 operand, not weight_format int8 with act_format int8" in err

# amaranth: UnusedElaboratable=no
"""The simulation top names its repeated modules (PE, row, block, vector unit) by their own text, so
designs with the same row or the same vector unit carry the same module and share its build."""

from __future__ import annotations

import dataclasses
import functools
import re

import pytest

from accel_dse.design_files import load_design
from rtl_gen import Fault, system_verilog

TINY = load_design("tiny")  # 4x4 WS, no vector unit
VEC = dataclasses.replace(TINY, vector_unit=True)
DRAM = (20, 1 << 12)


@pytest.fixture(autouse=True)
def _from_scratch(uncached_verilog):
    """Each design converted from scratch (not the run's Verilog cache): equal names come from equal texts."""


@functools.cache
def _verilog(config, fault: Fault | None = None) -> str:
    """The simulation top's Verilog (no cache directory: each design converted from scratch), once per
    design and fault in this module (several tests compare against the same designs)."""
    return system_verilog(config, dram=DRAM, fault=fault)


def _modules(verilog: str) -> dict[str, str]:
    """Module name -> its text (escaped names without the backslash)."""
    out = {}
    for match in re.finditer(r"^module \\?(\S+?)\s*\(.*?^endmodule", verilog, re.S | re.M):
        out[match.group(1)] = match.group(0)
    return out


def _named(verilog: str, suffix: str) -> list[str]:
    return [n for n in _modules(verilog) if n.startswith("accel_") and n.endswith(suffix)]


def test_designs_with_the_same_row_share_its_module_name_and_text():
    # b and wide are the vector-unit designs of the test below (converted once for both): b differs
    # from a in its weight and ofmap buffers and its vector unit
    a = _verilog(TINY)
    b = _verilog(dataclasses.replace(VEC, weight_sram_kib=8, ofmap_sram_kib=16))
    wide = _verilog(dataclasses.replace(VEC, cols=8))
    (row_a,), (row_b,), (row_wide,) = (_named(v, "_row") for v in (a, b, wide))
    assert row_a == row_b and _modules(a)[row_a] == _modules(b)[row_b]
    assert row_wide != row_a  # 8 PEs a row: another circuit, another name
    assert _named(wide, "_pe") == _named(a, "_pe")  # the same PE
    assert not any(TINY.config_hash[:12] in n for n in _named(a, "_row") + _named(a, "_pe"))


def test_a_fault_row_is_a_module_of_its_own_and_the_clean_row_keeps_its_name():
    clean = _verilog(TINY)
    faulty = _verilog(TINY, Fault(1, 2, 0, 1))
    assert _named(faulty, "_row") == _named(clean, "_row")
    (fault_row,) = _named(faulty, "_row_fault")
    assert fault_row not in _modules(clean)


def test_the_vector_unit_and_the_output_stage_are_named_by_their_text():
    vec = VEC
    a = _verilog(vec)
    b = _verilog(dataclasses.replace(vec, weight_sram_kib=8, ofmap_sram_kib=16))
    deeper = _verilog(dataclasses.replace(vec, ifmap_sram_kib=8))  # wider ifmap addresses
    wide = _verilog(dataclasses.replace(vec, cols=8))
    (va,), (vb,), (vd,) = (_named(v, "_vector") for v in (a, b, deeper))
    assert va == vb and _modules(a)[va] == _modules(b)[vb]
    assert vd != va
    assert _named(_verilog(TINY), "_vector") == []
    (oa,), (ob,) = (_named(v, "_ostage") for v in (a, b))
    assert oa == ob and _named(wide, "_ostage") != [oa]  # 8 columns: another output stage

"""The register map as data, its C header and its Markdown table (and docs/registers.md).

``SPEC`` is the map of issue #13 (offset, access), written here from the issue."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from accel_spec.errors import RtlError
from rtl_gen import CONTROL_REGMAP, Field, Register, RegisterMap, c_header, markdown_table

ROOT = Path(__file__).resolve().parents[2]
SPEC = {
    "ID": (0x000, "RO"), "VERSION": (0x004, "RO"), "CTRL": (0x008, "WO"), "STATUS": (0x00C, "RO"),
    "ERROR_CODE": (0x010, "RO"), "ERROR_PC": (0x014, "RO"), "IRQ_ENABLE": (0x018, "RW"),
    "IRQ_STATUS": (0x01C, "W1C"), "QUEUE_BASE_LO": (0x020, "RW"), "QUEUE_BASE_HI": (0x024, "RW"),
    "QUEUE_LEN": (0x028, "RW"),
    "CYCLES_TOTAL_LO": (0x030, "RO"), "CYCLES_TOTAL_HI": (0x034, "RO"),
    "CYCLES_COMPUTE_LO": (0x038, "RO"), "CYCLES_COMPUTE_HI": (0x03C, "RO"),
    "CYCLES_DMA_STALL_LO": (0x040, "RO"), "CYCLES_DMA_STALL_HI": (0x044, "RO"),
    "CONFIG_ROWS": (0x080, "RO"), "CONFIG_COLS": (0x084, "RO"), "CONFIG_DATAFLOW": (0x088, "RO"),
    "CONFIG_AXI_DATA_BYTES": (0x08C, "RO"), "CONFIG_IFMAP_DEPTH": (0x090, "RO"),
    "CONFIG_WEIGHT_DEPTH": (0x094, "RO"), "CONFIG_OFMAP_DEPTH": (0x098, "RO"), "CONFIG_QUEUE_DEPTH": (0x09C, "RO"),
    # issue 31: the checksum's control bit, mismatch counter and the RUN of the last mismatch
    "SDC_CTRL": (0x0C0, "RW"), "SDC_COUNT": (0x0C4, "RO"), "SDC_PC": (0x0C8, "RO"),
}
# A C translation unit that checks the header against the issue's map.
CHECKS = """
#include "accel_regs.h"
#include "accel_regs.h"  /* the include guard makes a second include harmless */
_Static_assert(ACCEL_CTRL_OFFSET == 0x008u, "CTRL");
_Static_assert(ACCEL_CYCLES_DMA_STALL_HI_OFFSET == 0x044u, "CYCLES_DMA_STALL_HI");
_Static_assert(ACCEL_CONFIG_QUEUE_DEPTH_OFFSET == 0x09Cu, "CONFIG_QUEUE_DEPTH");
_Static_assert(ACCEL_CTRL_CLEAR_MASK == (1u << 1), "CLEAR");
_Static_assert(ACCEL_STATUS_ERROR_SHIFT == 2u, "ERROR bit");
_Static_assert(ACCEL_ERROR_CODE_CODE_MASK == 0xFu, "4-bit code");
_Static_assert(ACCEL_ERROR_CODE_CODE_QUEUE_OVERFLOW == 5u, "code 5");
_Static_assert(ACCEL_ID_MAGIC_VALUE == 0xACCE1D5Eu, "magic");
_Static_assert(ACCEL_CONFIG_DATAFLOW_CODE_IS == 2u, "is");
unsigned int start_word(void) { return ACCEL_CTRL_START_MASK; }
"""


def test_map_has_the_issue_registers_at_their_offsets():
    assert {reg.name: (reg.offset, reg.access) for reg in CONTROL_REGMAP} == SPEC


def test_bits_of_the_flag_registers():
    bits = {(reg.name, f.name): (f.lsb, f.width) for reg in CONTROL_REGMAP for f in reg.fields if f.width < 32}
    assert bits == {
        ("CTRL", "START"): (0, 1), ("CTRL", "CLEAR"): (1, 1),
        ("STATUS", "BUSY"): (0, 1), ("STATUS", "DONE"): (1, 1), ("STATUS", "ERROR"): (2, 1),
        ("ERROR_CODE", "CODE"): (0, 4),
        ("IRQ_ENABLE", "DONE"): (0, 1), ("IRQ_ENABLE", "ERROR"): (1, 1), ("IRQ_ENABLE", "SDC"): (2, 1),
        ("IRQ_STATUS", "DONE"): (0, 1), ("IRQ_STATUS", "ERROR"): (1, 1), ("IRQ_STATUS", "SDC"): (2, 1),
        ("CONFIG_DATAFLOW", "CODE"): (0, 2), ("SDC_CTRL", "STOP"): (0, 1),
    }
    codes = {code: value for code, value, _ in CONTROL_REGMAP["ERROR_CODE"].field("CODE").enum}
    assert codes == {"NONE": 0, "BAD_OPCODE": 1, "BUFFER_RANGE": 2, "DRAM_ADDRESS": 3, "AXI_ERROR": 4,
                     "QUEUE_OVERFLOW": 5, "CONV_WINDOW": 6, "VECTOR": 7, "SDC": 8}


def _defines(text: str) -> dict[str, int]:
    found = re.findall(r"^#define (\w+) (0x[0-9A-F]+|\d+)u$", text, re.M)
    return {name: int(value, 0) for name, value in found}


def test_header_defines_agree_with_the_map():
    text = c_header(CONTROL_REGMAP, "ACCEL")
    defines = _defines(text)
    want: dict[str, int] = {}
    for reg in CONTROL_REGMAP:
        want[f"ACCEL_{reg.name}_OFFSET"] = reg.offset
        for f in reg.fields:
            name = f"ACCEL_{reg.name}_{f.name}"
            want |= {f"{name}_SHIFT": f.lsb, f"{name}_WIDTH": f.width,
                     f"{name}_MASK": ((1 << f.width) - 1) << f.lsb}
            if f.value is not None:
                want[f"{name}_VALUE"] = f.value
            want |= {f"{name}_{code}": value for code, value, _ in f.enum}
    assert defines == want
    assert text.startswith("/*") and "do not edit" in text.splitlines()[0]
    assert "#ifndef ACCEL_REGS_H\n#define ACCEL_REGS_H\n" in text
    assert text.rstrip().endswith("#endif /* ACCEL_REGS_H */")
    # every #define line is one the regex read (no malformed ones it skipped, bar the guard)
    assert sum(line.startswith("#define") for line in text.splitlines()) == len(defines) + 1


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (the define check above still runs)")
def test_header_compiles_and_matches_the_issue(tmp_path):
    (tmp_path / "accel_regs.h").write_text(c_header(CONTROL_REGMAP, "ACCEL"))
    (tmp_path / "check.c").write_text(CHECKS)
    proc = subprocess.run(["cc", "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic", "check.c"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_markdown_table_lists_every_register_and_field():
    text = markdown_table(CONTROL_REGMAP)
    rows = [line for line in text.splitlines() if re.match(r"^\| 0x", line)]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    assert {name: (int(offset, 16), access) for offset, name, access, _, _ in cells} == SPEC
    for (_, name, _, fields, _), reg in zip(cells, CONTROL_REGMAP, strict=True):
        listed = re.findall(r"`\[[\d:]+\]` (\w+):", fields)
        assert listed == [f.name for f in reg.fields], name
    assert "0xACCE1D5E" in cells[0][3]
    assert "5 QUEUE_OVERFLOW" in text


BEGIN, END = "<!-- BEGIN generated register table -->", "<!-- END generated register table -->"


def test_docs_registers_md_holds_the_generated_table():
    doc = (ROOT / "docs" / "registers.md").read_text()
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    section = doc.split(BEGIN)[1].split(END)[0].strip("\n") + "\n"
    assert section == markdown_table(CONTROL_REGMAP), "docs/registers.md is stale: run python scripts/registers_doc.py"


def test_pipes_in_docs_are_escaped():
    reg = Register("R", 0, "RO", (Field("F", 0, 1, "a | b"),), "x | y")
    text = markdown_table(RegisterMap("m", 4, (reg,)))
    assert "a \\| b" in text and "x \\| y" in text


@pytest.mark.parametrize("build, message", [
    (lambda: Field("f", 0, 1, ""), r"field name must be an upper-case identifier, not 'f'"),
    (lambda: Field("F", 31, 2, ""), r"field F must lie within bits 0..31, not lsb 31 width 2"),
    (lambda: Field("F", 0, 2, "", value=4), r"field F value 4 must fit in 2 bits, not 4"),
    (lambda: Register("R", 6, "RO", (Field("F", 0, 1, ""),), ""),
     r"offset must be a non-negative multiple of 4, not 6"),
    (lambda: Register("R", 0, "RW1", (Field("F", 0, 1, ""),), ""),
     r"access must be one of RO, WO, RW, W1C, not 'RW1'"),
    (lambda: Register("R", 0, "RO", (Field("F", 0, 4, ""), Field("G", 3, 1, "")), ""), r"field G overlaps"),
    (lambda: RegisterMap("m", 4, (Register("A", 0, "RO", (Field("F", 0, 1, ""),), ""),
                                  Register("B", 0, "RO", (Field("F", 0, 1, ""),), ""))), r"B at 0x000 repeats"),
    (lambda: RegisterMap("m", 4, (Register("A", 16, "RO", (Field("F", 0, 1, ""),), ""),)), r"must be below 2\*\*4"),
    (lambda: c_header(CONTROL_REGMAP, "accel-x"), r"C prefix must be an upper-case identifier .*, not 'accel-x'"),
    (lambda: CONTROL_REGMAP["NOPE"], r"has no register 'NOPE'"),
])
def test_bad_maps_are_refused_with_the_rule(build, message):
    with pytest.raises(RtlError, match=message):
        build()

"""The campaign's Verilog: the design's flat export with its fault targets made visible to cocotb.

The campaign writes into registers inside the design (a PE's operand, weight and partial-sum
registers; the output stage's pipeline registers). Verilator keeps only what is public; the
project's builds make just the top module's ports public (``accel_dse.simulate.runner.build``), so
here every named register of the PE modules and of the output stage module is marked
``/*verilator public_flat_rw*/`` in the Verilog text itself. That text hashes to its own build
in the same cache: one build per design and campaign, reused by the next campaign.

The flat export (``rtl_gen.to_verilog(flat=True)``) gives each PE instance its own module,
``<top>.array.row_<r>.pe_<c>``, reached from the top as ``array.row_<r>.pe_<c>``; the output
stage is ``<top>.output_stage`` (the checked design's duplicate, ``output_check.output_stage_dup``,
is not a target: a fault there is flagged with a correct output).
"""

from __future__ import annotations

import re

from accel_spec.config import ArrayConfig
from accel_spec.errors import SimulationError

__all__ = ["campaign_verilog", "pe_register_path", "PE_REGISTER_NAMES"]

#: Verilog names the export gives a PE's registers (``rtl_gen.core.pe.PE.registers``), in order
#: of preference: the left operand ``a`` drives ``a_out``, the partial sum ``v`` ``v_out``, the
#: shadow ``w`` ``s_out``; the stationary ``s`` keeps its name.
PE_REGISTER_NAMES = {"a": ("a_out", "a"), "v": ("v_out", "v"), "s": ("s",), "w": ("s_out", "w")}

_MODULE = re.compile(r"^module (\\\S+) \(.*?\);\n(.*?)^endmodule", re.M | re.S)
_REG = re.compile(r"^(  reg (?:signed )?(?:\[(\d+):0\] )?)([A-Za-z_][A-Za-z0-9_]*)( = [^;]*)?;$", re.M)


def _public(body: str) -> tuple[str, dict[str, int]]:
    """``body`` with every plainly named register public; and ``{name: width}`` of them."""
    widths: dict[str, int] = {}

    def mark(match: re.Match[str]) -> str:
        widths[match.group(3)] = int(match.group(2)) + 1 if match.group(2) else 1
        return f"{match.group(1)}{match.group(3)} /*verilator public_flat_rw*/{match.group(4) or ''};"

    return _REG.sub(mark, body), widths


def campaign_verilog(config: ArrayConfig, top: str) -> tuple[str, dict[str, dict[str, int]]]:
    """The flat Verilog of ``config`` with its fault targets public.

    Returns:
        The text, and per target module (its path from the top, e.g. ``array.row_0.pe_1`` or
        ``output_stage``) the widths of its public registers by name.
    """
    import rtl_gen
    from accel_dse.verilog_size import check_verilog_size

    check_verilog_size(config, f"design {config.short_name()}", flat=True)  # before anything is generated
    text = rtl_gen.to_verilog(config, flat=True)
    prefix = "\\" + top + "."
    registers: dict[str, dict[str, int]] = {}
    pieces: list[str] = []
    at = 0
    for match in _MODULE.finditer(text):
        name = match.group(1)
        path = name[len(prefix):] if name.startswith(prefix) else ""
        if re.fullmatch(r"array\.row_\d+\.pe_\d+|output_stage", path):
            body, widths = _public(match.group(2))
            registers[path] = widths
            pieces += [text[at:match.start(2)], body]
            at = match.end(2)
    pieces.append(text[at:])
    if "output_stage" not in registers:
        raise SimulationError(f"the flat export of {top} has no output_stage module (naming changed?)")
    return "".join(pieces), registers


def pe_register_path(registers: dict[str, dict[str, int]], row: int, col: int, reg: str) -> tuple[str, int] | None:
    """``(path, width)`` of PE ``(row, col)``'s register ``reg`` (``a``, ``v``, ``s``, ``w``), or
    None when the export has none (a register synthesis removed: nothing reads it)."""
    module = registers.get(f"array.row_{row}.pe_{col}")
    if module is None:
        return None
    for name in PE_REGISTER_NAMES[reg]:
        if name in module:
            return f"array.row_{row}.pe_{col}.{name}", module[name]
    return None

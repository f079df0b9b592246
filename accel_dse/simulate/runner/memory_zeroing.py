"""Memories zeroed at time 0 in an Icarus build (the simulation's copy of the Verilog only).

The export leaves every buffer without initial contents (``rtl_gen.tools.verilog_export``: a
hardware SRAM has none), so in Icarus, a four-state simulator, a word never written reads X. A
product the design multiplies by zero still goes unknown there (X times 0 is X): a narrow conv
run one tap a word loads only its channels' rows of each weight word, and the array's other rows
read X, so every output reads X. Verilator (``--x-initial fast``: zeros) and hardware give 0, and
so does Amaranth's simulator, which starts every memory at zero. :func:`zero_memories` gives
Icarus the same start: ``runner.build`` applies it to the text an Icarus build compiles, never to
the exported Verilog nor to its cache.
"""

from __future__ import annotations

import re

__all__ = ["zero_memories"]

#: A memory declaration as Yosys writes it: ``reg [7:0] name [127:0];`` (width optional, name plain
#: or escaped, either index order).
_MEMORY = re.compile(r"^(?P<indent>[ \t]*)reg\b(?:[ \t]+signed)?(?:[ \t]*\[\d+:\d+\])?[ \t]*"
                     r"(?P<name>\\\S+[ \t]|[A-Za-z_][A-Za-z0-9_$]*)[ \t]*\[(?P<a>\d+):(?P<b>\d+)\][ \t]*;[ \t]*\n",
                     re.M)

_MODULE = re.compile(r"^[ \t]*module\b.*?^[ \t]*endmodule\b", re.M | re.S)

#: Prefix of the named blocks added (each declares its own loop variable).
BLOCK_PREFIX = "accel_dse_zero_"


def _initialised(module: str, name: str) -> bool:
    """Whether ``module`` gives memory ``name`` contents of its own (Yosys: ``name[3] = ...;`` in
    an ``initial`` block, a blocking write at a constant index)."""
    return re.search(rf"^[ \t]*{re.escape(name.rstrip())}[ \t]*\[\d+\][ \t]*=[^=]", module, re.M) is not None


def _zero_module(module: str) -> str:
    count = 0

    def zeroed(found: re.Match[str]) -> str:
        nonlocal count
        name = found.group("name").rstrip()
        if _initialised(module, name):
            return found.group(0)
        low, high = sorted((int(found.group("a")), int(found.group("b"))))
        ref = f"{name} " if name.startswith("\\") else name  # an escaped name ends at a space
        block = f"{BLOCK_PREFIX}{count}"
        count += 1
        return (found.group(0) + f"{found.group('indent')}initial begin : {block}\n"
                f"{found.group('indent')}  integer i;\n"
                f"{found.group('indent')}  for (i = {low}; i <= {high}; i = i + 1) {ref}[i] = 0;\n"
                f"{found.group('indent')}end\n")

    return _MEMORY.sub(zeroed, module)


def zero_memories(verilog: str) -> str:
    """``verilog`` with every memory array set to zero at time 0 (module docstring).

    Each memory declaration gets an ``initial`` block right after it, in its module, writing zero
    to every word. A memory with contents of its own (written at a constant index in the text,
    as Yosys writes a memory's ``init``) is left as it is. Nothing else changes.

    Args:
        verilog: Verilog text (Yosys' output, e.g. ``rtl_gen.system_verilog``).

    Returns:
        The text an Icarus build compiles.
    """
    return _MODULE.sub(lambda found: _zero_module(found.group(0)), verilog)

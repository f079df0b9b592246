"""The control-register map as data, and its renderers (C header, Markdown table).

One description feeds three consumers: the AXI4-Lite slave ``rtl_gen.soc.csr.ControlRegisters``
decodes addresses and places bits from it, :func:`c_header` writes the driver's ``#define``\\ s
and :func:`markdown_table` the documentation (``docs/registers.md``). Registers are 32 bits
wide at byte offsets that are multiples of 4; a field is ``width`` bits from bit ``lsb``.

Access types (:data:`ACCESS`):

    RO   read-only; writes are ignored (response OKAY)
    WO   write-only; reads return 0; bits act for the one cycle of the write (self-clearing)
    RW   read/write storage; WSTRB selects which bytes a write changes
    W1C  read; writing 1 to a bit clears it (per byte strobe), writing 0 leaves it
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterator

from accel_spec.config import DATAFLOW_CODES  # CONFIG_DATAFLOW.CODE of each dataflow
from accel_spec.errors import RtlError

__all__ = [
    "ACCESS",
    "Field",
    "Register",
    "RegisterMap",
    "ErrorCode",
    "CONTROL_REGMAP",
    "CSR_MAGIC",
    "CSR_VERSION",
    "DATAFLOW_CODES",
    "c_header",
    "markdown_table",
]

#: The access types a register may have (module docstring).
ACCESS = ("RO", "WO", "RW", "W1C")
_REG_BITS = 32
_IDENT = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Field:
    """A bit field of a register.

    Args:
        name: upper-case identifier, unique within its register.
        lsb: lowest bit, 0..31.
        width: bits, 1..32; ``lsb + width <= 32``.
        doc: one-line meaning.
        value: the constant the field always reads, or None (state or a design parameter).
        enum: ``(name, value, meaning)`` of the codes the field takes, if it is an enumeration.

    Raises:
        RtlError: a name that is not an identifier, bits outside the register, an enum value
            that does not fit.
    """

    name: str
    lsb: int
    width: int
    doc: str
    value: int | None = None
    enum: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        if not _IDENT.match(self.name):
            raise RtlError(f"field name must be an upper-case identifier, not {self.name!r}")
        if not 0 <= self.lsb < _REG_BITS or not 1 <= self.width <= _REG_BITS - self.lsb:
            raise RtlError(f"field {self.name} must lie within bits 0..31, not lsb {self.lsb} width {self.width}")
        for code, value in [(f"value {self.value}", self.value), *((c[0], c[1]) for c in self.enum)]:
            if value is not None and not 0 <= value < (1 << self.width):
                raise RtlError(f"field {self.name} {code} must fit in {self.width} bits, not {value}")

    @property
    def mask(self) -> int:
        """The field's bits in place (``((1 << width) - 1) << lsb``)."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self) -> str:
        """``[msb:lsb]``, or ``[lsb]`` for one bit."""
        msb = self.lsb + self.width - 1
        return f"[{self.lsb}]" if msb == self.lsb else f"[{msb}:{self.lsb}]"


@dataclasses.dataclass(frozen=True)
class Register:
    """A 32-bit register.

    Args:
        name: upper-case identifier, unique in the map.
        offset: byte offset, a multiple of 4.
        access: one of :data:`ACCESS`.
        fields: its fields, not overlapping.
        doc: one-line meaning.

    Raises:
        RtlError: a bad name, offset or access type, or overlapping fields.
    """

    name: str
    offset: int
    access: str
    fields: tuple[Field, ...]
    doc: str

    def __post_init__(self) -> None:
        if not _IDENT.match(self.name):
            raise RtlError(f"register name must be an upper-case identifier, not {self.name!r}")
        if self.offset < 0 or self.offset % 4:
            raise RtlError(f"register {self.name} offset must be a non-negative multiple of 4, not {self.offset}")
        if self.access not in ACCESS:
            raise RtlError(f"register {self.name} access must be one of {', '.join(ACCESS)}, not {self.access!r}")
        if not self.fields:
            raise RtlError(f"register {self.name} must have at least one field")
        used = 0
        names: set[str] = set()
        for f in self.fields:
            if f.mask & used or f.name in names:
                raise RtlError(f"register {self.name} field {f.name} overlaps another field or repeats its name")
            used |= f.mask
            names.add(f.name)

    def field(self, name: str) -> Field:
        """The field called ``name``.

        Raises:
            RtlError: no such field.
        """
        for f in self.fields:
            if f.name == name:
                return f
        raise RtlError(f"register {self.name} has no field {name!r}")

    @property
    def mask(self) -> int:
        """All bits the register's fields hold."""
        out = 0
        for f in self.fields:
            out |= f.mask
        return out


@dataclasses.dataclass(frozen=True)
class RegisterMap:
    """Registers of one block, in address order.

    Args:
        name: the block's name (for the generated files' comments).
        addr_bits: bits of the byte address the block decodes (its window is ``2**addr_bits`` bytes).
        registers: the registers.

    Raises:
        RtlError: repeated names or offsets, or an offset outside the window.
    """

    name: str
    addr_bits: int
    registers: tuple[Register, ...]

    def __post_init__(self) -> None:
        seen_names: set[str] = set()
        seen_offsets: set[int] = set()
        for reg in self.registers:
            if reg.name in seen_names or reg.offset in seen_offsets:
                raise RtlError(f"register {reg.name} at 0x{reg.offset:03X} repeats a name or offset of the map")
            if reg.offset >= 1 << self.addr_bits:
                raise RtlError(f"register {reg.name} offset 0x{reg.offset:X} must be below 2**{self.addr_bits}")
            seen_names.add(reg.name)
            seen_offsets.add(reg.offset)
        object.__setattr__(self, "registers", tuple(sorted(self.registers, key=lambda r: r.offset)))

    def __iter__(self) -> Iterator[Register]:
        return iter(self.registers)

    def __getitem__(self, name: str) -> Register:
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise RtlError(f"register map {self.name} has no register {name!r}")


class ErrorCode(enum.IntEnum):
    """Values of ``ERROR_CODE.CODE``: why the accelerator stopped a program."""

    NONE = 0
    BAD_OPCODE = 1
    BUFFER_RANGE = 2
    DRAM_ADDRESS = 3
    AXI_ERROR = 4
    QUEUE_OVERFLOW = 5
    CONV_WINDOW = 6
    VECTOR = 7
    SDC = 8


_ERROR_DOCS = {
    ErrorCode.NONE: "no error",
    ErrorCode.BAD_OPCODE: "a command with an unknown opcode",
    ErrorCode.BUFFER_RANGE: "a buffer address out of range",
    ErrorCode.DRAM_ADDRESS: ("a DRAM address out of range or unaligned, or a transfer's lanes not whole bus beats "
                             "or above its word's"),
    ErrorCode.AXI_ERROR: "an AXI error response (SLVERR/DECERR) from memory",
    ErrorCode.QUEUE_OVERFLOW: "a program longer than the command queue",
    ErrorCode.CONV_WINDOW: "a WINDOW command with a zero field, or a window run addressing a word outside the ifmap "
                           "(not read)",
    ErrorCode.VECTOR: "a malformed VECTOR command: vkind, vrows, vwords or vn out of range, an operand or output "
                      "beyond the ifmap (a transpose's: vn rows of vp0 words), a transpose's pitch vp0 below "
                      "vrows / lanes, or no slot left for its parameter block (vector-unit designs)",
    ErrorCode.SDC: "a RUN's checksum or a STORE/MOVE's output-stage check mismatched with SDC_CTRL.STOP set "
                   "(ERROR_PC: that command)",
}

#: ``ID.MAGIC``: what software reads at offset 0 to recognise the block.
CSR_MAGIC = 0xACCE1D5E
#: ``VERSION.VERSION``: the register map's version.
CSR_VERSION = 1


def _word(name: str, doc: str, value: int | None = None) -> tuple[Field, ...]:
    return (Field(name, 0, 32, doc, value=value),)


def _flag_fields(*docs: tuple[str, str]) -> tuple[Field, ...]:
    return tuple(Field(name, bit, 1, doc) for bit, (name, doc) in enumerate(docs))


def _counter(name: str, offset: int, what: str) -> tuple[Register, Register]:
    return (
        Register(f"{name}_LO", offset, "RO", _word("VALUE", f"bits 31:0 of {what}"),
                 f"{what}, low word; reading it snapshots the high word into {name}_HI"),
        Register(f"{name}_HI", offset + 4, "RO", _word("VALUE", f"bits 63:32 of {what} at the last {name}_LO read"),
                 f"{what}, high word as of the last {name}_LO read (read LO first)"),
    )


def _config(name: str, offset: int, doc: str, fields: tuple[Field, ...] | None = None) -> Register:
    return Register(f"CONFIG_{name}", offset, "RO", fields or _word("VALUE", doc), f"design constant: {doc}")


_IRQ_BITS = (("DONE", "a program finished"), ("ERROR", "a program stopped with an error"),
             ("SDC", "a RUN's checksum or the output stage's check mismatched (checksum designs)"))

#: The accelerator's control registers (``rtl_gen.soc.csr.ControlRegisters``), 4 KiB window.
CONTROL_REGMAP = RegisterMap("accelerator control", 12, (
    Register("ID", 0x000, "RO", _word("MAGIC", "identifies the block", CSR_MAGIC), "block identifier"),
    Register("VERSION", 0x004, "RO", _word("VERSION", "register-map version", CSR_VERSION), "register-map version"),
    Register("CTRL", 0x008, "WO", _flag_fields(
        ("START", "start the program at QUEUE_BASE (ignored while STATUS.BUSY); clears DONE, ERROR and "
                  "the error registers"),
        ("CLEAR", "clear STATUS.DONE, STATUS.ERROR, ERROR_CODE and ERROR_PC"),
    ), "control; self-clearing"),
    Register("STATUS", 0x00C, "RO", _flag_fields(
        ("BUSY", "a program is running"),
        ("DONE", "the last program finished (sticky until CLEAR or START)"),
        ("ERROR", "the last program stopped with an error (sticky until CLEAR or START)"),
    ), "status"),
    Register("ERROR_CODE", 0x010, "RO", (
        Field("CODE", 0, 4, "why the program stopped",
              enum=tuple((c.name, c.value, _ERROR_DOCS[c]) for c in ErrorCode)),
    ), "error code of the last error (0 when ERROR is clear)"),
    Register("ERROR_PC", 0x014, "RO", _word("PC", "index of the failing command in the program"),
             "command index of the last error"),
    Register("IRQ_ENABLE", 0x018, "RW", _flag_fields(*_IRQ_BITS),
             "interrupt enables; irq = |(IRQ_STATUS & IRQ_ENABLE)"),
    Register("IRQ_STATUS", 0x01C, "W1C", _flag_fields(*_IRQ_BITS),
             "interrupt causes, set by the events, write 1 to clear"),
    Register("QUEUE_BASE_LO", 0x020, "RW", _word("ADDR", "bits 31:0 of the program's DRAM byte address"),
             "command queue base address, low word"),
    Register("QUEUE_BASE_HI", 0x024, "RW", _word("ADDR", "bits 63:32 of the program's DRAM byte address"),
             "command queue base address, high word"),
    Register("QUEUE_LEN", 0x028, "RW", _word("LEN", "commands in the program"), "program length in commands"),
    *_counter("CYCLES_TOTAL", 0x030, "cycles from START to the end of the last program"),
    *_counter("CYCLES_COMPUTE", 0x038, "cycles the array computed"),
    *_counter("CYCLES_DMA_STALL", 0x040, "cycles the program waited for the DMA"),
    _config("ROWS", 0x080, "PE rows of the array"),
    _config("COLS", 0x084, "PE columns of the array"),
    _config("DATAFLOW", 0x088, "dataflow", (
        Field("CODE", 0, 2, "dataflow", enum=(("WS", 0, "weight stationary"), ("OS", 1, "output stationary"),
                                              ("IS", 2, "input stationary"))),
    )),
    _config("AXI_DATA_BYTES", 0x08C, "bytes per beat of the AXI4 memory interface"),
    _config("IFMAP_DEPTH", 0x090, "words of the ifmap buffer"),
    _config("WEIGHT_DEPTH", 0x094, "words of the weight buffer"),
    _config("OFMAP_DEPTH", 0x098, "words of the ofmap buffer"),
    _config("QUEUE_DEPTH", 0x09C, "commands the command queue holds"),
    Register("SDC_CTRL", 0x0C0, "RW", _flag_fields(
        ("STOP", "stop the program at a checksum mismatch (ERROR_CODE SDC); clear: count it and go on"),
    ), "checksum control (checksum designs; no effect otherwise)"),
    Register("SDC_COUNT", 0x0C4, "RO", _word("COUNT", "output words whose checksum mismatched since START"),
             "checksum mismatches of the last program (0 without a checksum)"),
    Register("SDC_PC", 0x0C8, "RO", _word("PC", "index of the RUN (checksum) or STORE/MOVE (output stage) of the "
                                              "last mismatch"),
             "command index of the last checksum mismatch"),
))


def _check_prefix(prefix: str) -> None:
    if not _IDENT.match(prefix):
        raise RtlError(f"C prefix must be an upper-case identifier (A-Z, 0-9, _), not {prefix!r}")


def _hex(value: int) -> str:
    return f"0x{value:08X}u"


def c_header(regmap: RegisterMap, prefix: str) -> str:
    """A C header of ``regmap``: per register ``<P>_<REG>_OFFSET``; per field ``_SHIFT``,
    ``_WIDTH`` and ``_MASK`` (in place), ``_VALUE`` for constant fields and
    ``<P>_<REG>_<FIELD>_<CODE>`` for enumerated codes. Include guard ``<P>_REGS_H``.

    Args:
        regmap: the map.
        prefix: upper-case identifier that starts every name, e.g. ``ACCEL``.

    Raises:
        RtlError: a prefix that is not an upper-case C identifier.
    """
    _check_prefix(prefix)
    guard = f"{prefix}_REGS_H"
    lines = [
        # the module name before the subpackages (now rtl_gen.soc.regmap): exported headers stay byte-identical
        f"/* {regmap.name} registers: generated by accel-dse (rtl_gen.soc.regmap), do not edit. */",
        f"/* 32-bit registers at byte offsets in a {1 << regmap.addr_bits}-byte window; masks are in place. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
    ]
    for reg in regmap:
        name = f"{prefix}_{reg.name}"
        lines.append(f"/* {reg.name} ({reg.access}): {reg.doc} */")
        lines.append(f"#define {name}_OFFSET 0x{reg.offset:03X}u")
        for f in reg.fields:
            fname = f"{name}_{f.name}"
            lines.append(f"#define {fname}_SHIFT {f.lsb}u")
            lines.append(f"#define {fname}_WIDTH {f.width}u")
            lines.append(f"#define {fname}_MASK {_hex(f.mask)}")
            if f.value is not None:
                lines.append(f"#define {fname}_VALUE {_hex(f.value)}")
            for code, value, _ in f.enum:
                lines.append(f"#define {fname}_{code} {value}u")
        lines.append("")
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(regmap: RegisterMap) -> str:
    """A Markdown table of ``regmap``: one row per register (offset, name, access, fields, meaning);
    each field as ``bits NAME: meaning``, with its constant value or codes."""
    rows = ["| offset | register | access | fields | description |", "| --- | --- | --- | --- | --- |"]
    for reg in regmap:
        parts = []
        for f in reg.fields:
            text = f"`{f.bits}` {f.name}: {f.doc}"
            if f.value is not None:
                text += f" (reads 0x{f.value:X})"
            if f.enum:
                text += " (" + ", ".join(f"{value} {code}: {doc}" for code, value, doc in f.enum) + ")"
            parts.append(_cell(text))
        rows.append(f"| 0x{reg.offset:03X} | {reg.name} | {reg.access} | {'<br>'.join(parts)} | {_cell(reg.doc)} |")
    return "\n".join(rows) + "\n"

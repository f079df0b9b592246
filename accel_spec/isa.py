"""The accelerator's command encoding: what the command queue in DRAM holds (stdlib only).

A program is ``QUEUE_LEN`` commands of :data:`COMMAND_BYTES` bytes each, little-endian, at the
byte address ``QUEUE_BASE`` in DRAM (both set in the control registers; ``QUEUE_BASE`` a
multiple of the AXI data width). The accelerator reads the whole program into its command
queue (``QUEUE_DEPTH`` commands; a longer program is the error ``ERROR_QUEUE``) in whole beats:
:func:`fetch_beats` beats from ``QUEUE_BASE``. On a bus wider than one command (``W`` of 64 or
128 bytes, :func:`queue_entry_commands` commands a beat) a program whose length is not a
multiple of ``W / 32`` is read up to the end of its last beat, at most ``W - 32`` bytes past
its last command: the host keeps those bytes inside DRAM (any contents; they are never
decoded). It then issues the commands in order, one at a time, to its units: the DMA
engine (``LOAD``, ``STORE``, ``MOVE``), the array (``RUN``) and, on a design with
``vector_unit``, the vector unit (``VECTOR``). A command waits until its unit is idle and
until the units named by its wait bits are idle; ``SYNC`` waits for all of them. The program
ends after its last command, when every unit is idle: the DONE status and interrupt.

Bit fields (``lsb``, ``width``) of a command, low bits first; fields not listed are zero::

    all      opcode [0, 4)   wait_dma [4]   wait_run [5]   wait_vec [31]
    LOAD     buffer [6, 8)   dram_addr [32, 64)   dram_stride [64, 96)   rows [96, 112)
    STORE    words [112, 128)   buf_addr [128, 160)   row_step [160, 192)   word_step [192, 224)
             lanes [240, 256)   STORE only: requant [8]   q_by_row [9]   q_base [224, 240)
             LOAD only: slide [10]
    RUN      m [32, 64)   k [64, 96)   n [96, 128)   accumulate [128]   a_stride [136, 160)
             x_base [160, 192)   y_base [192, 224)   o_base [224, 256)
    MOVE     dst_word_step [10, 31)   dst_addr [32, 64)   dst_row_step [64, 96)   rows, words,
             buf_addr, row_step, word_step, q_by_row, q_base as STORE
    RUN      window [6]  (A through the convolution window of the last WINDOW command)
    WINDOW   stride_h [8, 12)   dilation_h [12, 16)   image_rows [16, 31)   in_w [32, 48)   in_h [48, 64)
             out_w [64, 80)
             stride_w [80, 84)   dilation_w [84, 88)   kw [88, 92)   pad_top [96, 104)   pad_left [104, 112)
             cblocks [112, 128)   origin [128, 160)   px_step [160, 176)   row_step_w [176, 208)
             kx_step [208, 224)   ky_step [224, 256)   pack [92, 96)
             (pad_top, pad_left, origin: two's complement)
    VECTOR   vkind [8, 12)   vcolmajor [12]   vsrc [32, 64)   vsrc2 [64, 96)   vdst [96, 128)   vrows [128, 144)
             vqrows [144, 160)   vwords [160, 184)   vn [192, 216)
             the NEXT slot: its parameter block, vp0 .. vp7 (32 bits each, two's complement) [32 i, 32 i + 32)

``buffer``: 0 ifmap, 1 weight, 2 ofmap (raw accumulators), 3 qparam. A transfer moves ``rows``
DRAM rows of ``words`` buffer words each: row ``r`` starts at byte ``dram_addr + r *
dram_stride`` and holds its words back to back; word ``j`` of row ``r`` is buffer word
``buf_addr + r * row_step + j * word_step``. A buffer word in DRAM is its lanes in order, each
lane :func:`dram_lane_bytes` bytes (two's complement, little-endian): inputs 1 or 2 bytes, raw
accumulators 4 or 8 (sign-extended), requantised outputs ``input_bits / 8``, qparam lanes 16
(bias int32 at byte 0, multiplier int32 at 4, shift at 8, zero point, act_min, act_max as int16
at 10, 12, 14). ``lanes`` is how many of those lanes cross DRAM (0: all of the word's,
:func:`dram_word_lanes`): a word is then ``lanes * dram_lane_bytes`` bytes in DRAM, its first
lanes; a ``LOAD`` writes the word's other lanes as zero, a ``STORE`` leaves them out. So a
tensor with fewer channels than a word has lanes is stored densely, without zero lanes.
Packed int4 (a design with ``pack_int4``, its ``packed_kinds``): the lanes of a packed kind's
word are 4-bit two's complement, two a byte, lane ``2i`` in the low nibble of byte ``i`` and lane
``2i + 1`` in the high one; a ``LOAD`` sign-extends each into its 8-bit buffer lane, a
requantising ``STORE`` keeps the low nibble of each output lane (the output stage saturates
int4 outputs to [-8, 7]), so the word is ``lanes / 2`` bytes in DRAM.
A ``LOAD`` with ``slide`` is a sliding load (tap packing): each word it writes is the last
``max_beats`` beats the DMA received (its narrow words side by side, oldest in the low lanes),
``rtl_gen.soc.dma``; the window's ``pack`` reads such words.
``dram_addr`` and ``dram_stride`` must be multiples of the AXI data width, and ``lanes`` at most
the word's lanes with ``lanes * dram_lane_bytes`` a whole number of AXI beats (``ERROR_DRAM``
otherwise: :func:`transfer_beats`), every word address below the buffer's depth (``ERROR_BUFFER``).

``STORE`` with ``requant`` reads the ofmap words through the output stage with qparam word
``q_base + j`` (word ``j`` of each row; WS/OS) or ``q_base + r`` (``q_by_row``; IS) and writes
``input_bits``-wide lanes; without it, raw accumulator lanes. ``RUN`` starts the array on an
``m x k x n`` GEMM whose operands start at word ``x_base`` / ``y_base`` of the x / y buffers and
whose outputs start at word ``o_base`` of the ofmap (``x``: ifmap for WS/OS, weight for IS);
a nonzero ``a_stride`` spaces the folds of ``A`` that many words apart (WS/OS: the x words of
row-fold ``f`` start ``f * a_stride`` past ``x_base``; IS: the y words of column-fold ``f``,
``f * a_stride`` past ``y_base``; 0: packed), so a run can read its ``A`` tile in place from a
larger matrix held on chip.

``WINDOW`` sets the convolution window that later ``RUN`` commands with ``window`` use (a run
latches it at its start, so a ``WINDOW`` may be issued while the previous run computes; it takes
no unit and costs only its issue slot). Such a run (weight stationary only; ``ERROR_OPCODE``
otherwise) reads its ``A`` not as packed rows but from an input band held in the ifmap in NHWC
order (``cw`` words per pixel, ``R`` channels a word, zero lanes beyond the channels): its
row-fold ``f`` is kernel tap ``(ky, kx)`` and channel word ``cb`` with ``f = (ky * kw + kx) *
cblocks + cb``, its streamed row ``s`` the output pixel ``(oy, ox) = divmod(s, out_w)``. The
word read is ``x_base + origin + ky * ky_step + kx * kx_step + cb + oy * row_step_w + ox *
px_step`` for the input pixel ``iy = oy * stride_h + ky * dilation_h - pad_top``, ``ix = ox *
stride_w + kx * dilation_w - pad_left``; when ``iy`` is outside ``[0, in_h)`` or ``ix`` outside
``[0, in_w)`` no word is read and the lanes are zero (padding made on chip). ``kw`` is the taps a kernel
row of the run has: a run may read a tile of the kernel's taps (whole kernel rows, or part of
one), its pads then shifted by the first tap's offset (negative when the tile skips band rows or
columns). The compiler sets
``origin = -(pad_top * in_w + pad_left) * cw``, ``px_step = stride_w * cw``, ``row_step_w =
stride_h * in_w * cw``, ``kx_step = dilation_w * cw`` and ``ky_step = dilation_h * in_w * cw``
(``perf_model.compiler.conv_window``). A nonzero ``image_rows`` runs several images in one run:
the stream's output rows are ``image_rows`` an image (``oy`` above counts within the image, the
padding check too), and image ``b``'s words lie ``b * image_rows * row_step_w`` words past the
first's (its band ``image_rows * stride_h`` input rows further on); 0: one image.
A nonzero ``pack`` packs ``T = 2 ** pack`` taps of a kernel row in one word (tap packing,
``perf_model.compiler.conv_pack``): the band's word of pixel ``ix`` holds the pixels ``ix .. ix +
T - 1`` of its row, lane group ``t`` (``R / T`` lanes) pixel ``ix + t``; a row-fold's ``kx`` is then
a group of ``T`` taps (the compiler sets ``kw`` to the groups, ``dilation_w = kx_step = T``) and
the pad check is per lane group: group ``t`` is zero when ``ix + t`` is outside ``[0, in_w)``, and
no word is read when every group is. The generator has ``max_groups`` group checks (a design
parameter; groups above it are never packed).
A word address outside the ifmap stops the program with
``ERROR_WINDOW`` (the word is not read), as does a ``WINDOW`` with a zero stride, dilation,
``kw``, ``cblocks``, ``in_w``, ``in_h`` or ``out_w``, or with a ``pack`` above ``log2`` of the
design's ``max_groups`` (its lane groups would go unchecked).

``MOVE`` keeps an output on chip (on-chip reuse across layers): it reads ``rows x words`` ofmap
words as a requantised ``STORE`` does (same address walk, parameters and output stage) and
writes each requantised word, ``input_bits``-wide lanes, to ifmap word ``dst_addr + r *
dst_row_step + j * dst_word_step`` instead of DRAM. A requantised ofmap word has ``C`` lanes, an
ifmap word ``R`` (WS/OS) or ``C`` (IS): a WS/OS design moves only with ``R == C`` (``ERROR_OPCODE``
otherwise), and then a WS output word is a word of the next layer's ``A``, as an IS one is on any
shape. ``ERROR_BUFFER`` for a source beyond the ofmap or a destination beyond the ifmap. It
occupies the DMA unit (one word a cycle, no DRAM traffic): :func:`move_cycles`.

``VECTOR`` (designs with ``vector_unit``; ``ERROR_OPCODE`` otherwise) runs one op of the vector
unit (``rtl_gen.core.vector_unit``) on int8 words of the ifmap buffer: ``vkind`` its code
(``accel_spec.vector_isa.VECTOR_CODES``), ``vrows`` rows of ``vwords`` words (row ``r`` of the
first operand at ifmap word ``vsrc + r * vwords``, of the second at ``vsrc2 + ...``, of the
output at ``vdst + ...``; with ``vcolmajor`` word ``t`` of row ``r`` is at ``vsrc + t * vrows + r``:
the layout of a GEMM output moved into the ifmap, a token's channels one fold ``vrows`` words
apart), ``vn`` elements a row, ``vqrows`` the period of a causal mask's
query index, and the unit's parameter registers in the next queue slot (no DMA: the sequencer
reads both slots at once, issues one command and goes on after the block). A ``VECTOR`` with
``vkind`` outside the codes, ``vrows``, ``vwords`` or ``vn`` zero, ``vn`` above ``vwords`` times
the lanes, ``vsrc``, ``vsrc2`` or ``vdst`` whose ``vrows * vwords`` words pass the ifmap's depth
(``vsrc2`` is checked for every kind: set it to ``vsrc`` when unused; a RoPE's table at ``vsrc2``
for ``2 * vrows * vwords`` words when ``vqrows`` is 1, else ``vrows * vwords + 2 * vwords``, a
bound of its ``ceil(vrows / vqrows)`` table rows of ``2 * vwords``; a pooling's ``vdst`` for
``vrows`` times its output image's words, parameter register 7; a transpose's output ``vn * vp0``
words from ``vdst``, ``vp0`` its output row pitch), a transpose whose pitch cannot hold an output
row (``vp0 * lanes < vrows``: it needs ``vp0 * lanes >= vrows``), or no slot left for its
parameter block is ``ERROR_VECTOR``. It occupies the vector unit for
``perf_model.vector_timing.vector_run_cycles`` cycles; a later command that reads its output
(a ``RUN`` or a ``STORE`` of the ifmap) or overwrites its operands waits for it with ``wait_vec``.
On such a design a ``STORE`` may also read the ifmap (``buffer`` 0, without ``requant``): its
words leave as they are loaded, one cycle after their read, like raw ofmap words.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = [
    "COMMAND_BYTES", "QUEUE_DEPTH", "Opcode", "Buffer", "FIELDS", "Command", "FieldRangeError", "encode", "decode",
    "dram_lane_bytes", "dram_word_lanes", "transfer_beats", "ERROR_NONE", "ERROR_OPCODE", "ERROR_BUFFER",
    "ERROR_DRAM", "ERROR_AXI",
    "ERROR_QUEUE", "ERROR_WINDOW", "ERROR_VECTOR", "ERROR_SDC", "ERROR_NAMES", "WINDOW_FIELDS",
    "SIGNED_WINDOW_FIELDS", "VECTOR_FIELDS",
    "axi_data_bytes", "dram_word_bytes", "OUTPUT_STAGE_LATENCY",
    "store_read_latency", "STORE_FIFO_WORDS", "move_cycles", "MAX_AXI_DATA_BYTES", "queue_entry_commands",
    "fetch_beats", "OUTSTANDING", "DRAM_LATENCY", "CHECK_LATENCY",
]

#: Bytes per command.
COMMAND_BYTES = 32
#: Widest AXI data bus, bytes: 1024 bits, the largest data width AXI4 defines. A beat of it
#: carries ``MAX_AXI_DATA_BYTES / COMMAND_BYTES`` = 4 commands of the program fetch.
MAX_AXI_DATA_BYTES = 128
#: Bytes of one output-stage parameter lane in DRAM.
QPARAM_LANE_BYTES = 16
#: Commands the on-chip command queue holds (16 KiB of SRAM).
QUEUE_DEPTH = 512
#: Register stages of the output stage (``rtl_gen.core.output_stage``): a requantised word leaves
#: it this many cycles after its ofmap word enters. The timing contract of both the RTL and the model.
OUTPUT_STAGE_LATENCY = 6
#: Bursts each DMA engine keeps in flight (``rtl_gen.soc.system``'s default; the model's recurrences).
OUTSTANDING = 8
#: Read latency of the DRAM model, cycles: what ``simulate`` builds into the SoC's DRAM model and what
#: the model assumes by default (``perf_model.program_timing.DEFAULT_DRAM_LATENCY``).
DRAM_LATENCY = 20
#: Clock edges after the edge that raises a run's ``done`` until the checksum's ``mismatch`` holds its
#: last word's comparison (``rtl_gen.core.checksum``; the model's ``perf_model.physical.checksum``).
CHECK_LATENCY = 1

# Error codes of the ERROR_CODE register.
ERROR_NONE, ERROR_OPCODE, ERROR_BUFFER, ERROR_DRAM, ERROR_AXI, ERROR_QUEUE, ERROR_WINDOW = range(7)
#: A malformed ``VECTOR`` command (module docstring).
ERROR_VECTOR = 7
#: A checksum mismatch of a RUN (``checksum = "detect"``, ``SDC_CTRL.STOP`` set): 8 (7 is the vector unit's).
ERROR_SDC = 8
ERROR_NAMES = {
    ERROR_NONE: "none", ERROR_OPCODE: "bad opcode", ERROR_BUFFER: "buffer address out of range",
    ERROR_DRAM: "DRAM address, stride or word size (lanes) not a whole number of AXI beats, or lanes above "
                "the word's",
    ERROR_AXI: "AXI error response", ERROR_QUEUE: "program longer than the command queue",
    ERROR_WINDOW: "convolution window malformed or reading outside the ifmap",
    ERROR_VECTOR: "vector command malformed (kind, geometry, ifmap range or a missing parameter block)",
    ERROR_SDC: "checksum mismatch (silent data corruption) in a RUN",
}


class Opcode:
    """Values of the ``opcode`` field (0 is invalid, so a zeroed queue word is an error)."""

    LOAD = 1
    STORE = 2
    RUN = 3
    SYNC = 4
    MOVE = 5
    WINDOW = 6
    VECTOR = 7
    #: Not an opcode: the parameter block, the queue slot after a ``VECTOR`` (never decoded alone).
    VECTOR_PARAMS = 16


class Buffer:
    """Values of the ``buffer`` field."""

    IFMAP = 0
    WEIGHT = 1
    OFMAP = 2
    QPARAM = 3


#: ``name -> (lsb, width)`` of every field (see the module docstring).
FIELDS: dict[str, tuple[int, int]] = {
    "opcode": (0, 4), "wait_dma": (4, 1), "wait_run": (5, 1), "buffer": (6, 2), "requant": (8, 1),
    "q_by_row": (9, 1), "slide": (10, 1), "lanes": (240, 16),
    "dram_addr": (32, 32), "dram_stride": (64, 32), "rows": (96, 16),
    "words": (112, 16),
    "buf_addr": (128, 32), "row_step": (160, 32), "word_step": (192, 32), "q_base": (224, 16),
    "m": (32, 32), "k": (64, 32), "n": (96, 32), "accumulate": (128, 1), "x_base": (160, 32),
    "y_base": (192, 32), "o_base": (224, 32), "a_stride": (136, 24),
    "dst_word_step": (10, 21), "dst_addr": (32, 32), "dst_row_step": (64, 32), "wait_vec": (31, 1),
    "vkind": (8, 4), "vcolmajor": (12, 1),
    "vsrc": (32, 32), "vsrc2": (64, 32), "vdst": (96, 32), "vrows": (128, 16), "vqrows": (144, 16),
    "vwords": (160, 24), "vn": (192, 24),
    **{f"vp{i}": (32 * i, 32) for i in range(8)},
    "window": (6, 1), "stride_h": (8, 4), "dilation_h": (12, 4), "in_w": (32, 16), "in_h": (48, 16),
    "out_w": (64, 16), "stride_w": (80, 4), "dilation_w": (84, 4),
    "kw": (88, 4), "image_rows": (16, 15), "pad_top": (96, 8), "pad_left": (104, 8), "cblocks": (112, 16),
    "origin": (128, 32), "pack": (92, 4),
    "px_step": (160, 16), "row_step_w": (176, 32), "kx_step": (208, 16), "ky_step": (224, 32),
}

#: The ``WINDOW`` fields that are two's complement (a tap tile's pads may be negative: the band's
#: rows above the tile's first kernel row are skipped).
SIGNED_WINDOW_FIELDS = ("pad_top", "pad_left", "origin")
#: The fields of a ``WINDOW`` command, in the order the RTL latches them.
WINDOW_FIELDS = ("in_w", "in_h", "out_w", "stride_h", "stride_w", "dilation_h", "dilation_w", "kw", "pad_top",
                 "pad_left", "cblocks", "origin",
                 "px_step", "row_step_w", "kx_step", "ky_step", "image_rows", "pack")

#: The fields of a ``VECTOR`` command (its parameter block is the next slot: ``vp0`` .. ``vp7``).
VECTOR_FIELDS = ("vkind", "vcolmajor", "vsrc", "vsrc2", "vdst", "vrows", "vwords", "vn", "vqrows")

_PER_OP = {
    Opcode.LOAD: ("buffer", "dram_addr", "dram_stride", "rows", "words", "buf_addr", "row_step", "word_step",
                  "lanes", "slide"),
    Opcode.STORE: ("buffer", "requant", "q_by_row", "dram_addr", "dram_stride", "rows", "words", "buf_addr",
                   "row_step", "word_step", "q_base", "lanes"),
    Opcode.RUN: ("m", "k", "n", "accumulate", "a_stride", "x_base", "y_base", "o_base", "window"),
    Opcode.SYNC: (),
    Opcode.MOVE: ("q_by_row", "dst_word_step", "dst_addr", "dst_row_step", "rows", "words", "buf_addr", "row_step",
                  "word_step", "q_base"),
    Opcode.WINDOW: WINDOW_FIELDS,
    Opcode.VECTOR: VECTOR_FIELDS,
    Opcode.VECTOR_PARAMS: tuple(f"vp{i}" for i in range(8)),
}


@dataclasses.dataclass(frozen=True)
class Command:
    """One command: its opcode, wait bits and the fields of its opcode (others must be 0)."""

    opcode: int
    wait_dma: int = 0
    wait_run: int = 0
    fields: tuple[tuple[str, int], ...] = ()
    wait_vec: int = 0

    def __getitem__(self, name: str) -> int:
        for field, value in self.fields:
            if field == name:
                return value
        return 0

    @classmethod
    def make(cls, opcode: int, *, wait_dma: int = 0, wait_run: int = 0, wait_vec: int = 0, **fields: int) -> Command:
        """A command from keyword fields; raises ``ValueError`` for a field it has not, and
        :class:`FieldRangeError` for a value that does not fit its field's bits."""
        names = tuple(fields)
        plan = _PLANS.get((opcode, names))
        if plan is None:
            plan = _plan(opcode, names)
        values = tuple(fields.values())
        items = []
        for i, name, limit in plan:
            value = int(values[i])
            if not 0 <= value < limit:
                raise FieldRangeError(f"{name} must fit in {FIELDS[name][1]} bits, not {value}")
            items.append((name, value))
        return cls(opcode, int(wait_dma), int(wait_run), tuple(items), int(wait_vec))


#: Per opcode, its fields and the bound each value stays below (``2 ** bits``).
_LIMITS = {op: {name: 1 << FIELDS[name][1] for name in names} for op, names in _PER_OP.items()}
#: Per opcode and field names in the order given to ``Command.make``: ``(index given, name,
#: bound)`` in name order (a command's ``fields`` are sorted by name).
_PLANS: dict[tuple[int, tuple[str, ...]], tuple[tuple[int, str, int], ...]] = {}


def _plan(opcode: int, names: tuple[str, ...]) -> tuple[tuple[int, str, int], ...]:
    """``_PLANS``' entry of ``opcode`` and ``names`` (made and kept); ``ValueError`` for an
    unknown opcode or a field the opcode has not."""
    limits = _LIMITS.get(opcode)
    if limits is None:
        raise ValueError(f"opcode must be one of {sorted(_PER_OP)}, not {opcode!r}")
    for name in names:
        if name not in limits:
            raise ValueError(f"opcode {opcode} has no field {name!r}")
    plan = _PLANS[(opcode, names)] = tuple(sorted(((i, name, limits[name]) for i, name in enumerate(names)),
                                                  key=lambda p: p[1]))
    return plan


class FieldRangeError(ValueError):
    """A command field's value past its bits: a program the compiler laid out beyond what the ISA
    addresses (a ``dram_addr`` past 32 bits, a count past 16), which callers scoring a design report
    as the reason the design cannot run the program."""


def encode(command: Command) -> bytes:
    """The :data:`COMMAND_BYTES` little-endian bytes of ``command``."""
    word = 0 if command.opcode == Opcode.VECTOR_PARAMS else (
        command.opcode | command.wait_dma << 4 | command.wait_run << 5 | command.wait_vec << 31)
    for name, value in command.fields:
        lsb, width = FIELDS[name]
        word |= (value & ((1 << width) - 1)) << lsb
    return word.to_bytes(COMMAND_BYTES, "little")


def decode(raw: bytes) -> Command:
    """The command in ``raw`` (inverse of :func:`encode` for valid opcodes; a ``VECTOR``'s parameter
    block decodes as whatever its low bits spell)."""
    word = int.from_bytes(raw, "little")
    opcode = word & 0xF
    names = _PER_OP.get(opcode, ())
    fields = tuple(sorted((n, (word >> FIELDS[n][0]) & ((1 << FIELDS[n][1]) - 1)) for n in names))
    return Command(opcode, (word >> 4) & 1, (word >> 5) & 1, fields, (word >> 31) & 1)


def dram_lane_bytes(buffer: int, input_bits: int, acc_bits: int, *, requant: bool = False) -> int:
    """Bytes one lane of a ``buffer`` word occupies in DRAM (see the module docstring)."""
    if buffer in (Buffer.IFMAP, Buffer.WEIGHT) or (buffer == Buffer.OFMAP and requant):
        return input_bits // 8
    if buffer == Buffer.OFMAP:
        return 4 if acc_bits <= 32 else 8
    return QPARAM_LANE_BYTES


def axi_data_bytes(rows: Any, cols: Any, input_bits: Any, dram_bytes_per_cycle: Any,
                   input_stationary: Any = False, packed: Any = False) -> Any:
    """AXI data width in bytes of a design: what ``dram_bytes_per_cycle`` asks, as a bus.

    The smallest power of two at least ``dram_bytes_per_cycle``, but no wider than
    :data:`MAX_AXI_DATA_BYTES` and than the largest power of two dividing a row or column of
    inputs in bytes, so every buffer word in DRAM is a whole number of beats (an array of 12
    rows of int8 gets a 4-byte bus whatever the bandwidth it asks). Input stationary, a word of
    the output stage's parameters is one 16-byte lane, so the bus is at most 16 bytes there.
    ``packed`` (a design with packed int4 words): a row or column of inputs is half as many
    bytes.

    One definition for one design (Python ints and bools: an ``int``) and for many (integer numpy
    arrays, ``dram_bytes_per_cycle`` float, the flags bool: an int64 array): only arithmetic and
    comparisons that mean the same on both.
    """
    want: Any = 1
    for _ in range(MAX_AXI_DATA_BYTES.bit_length() - 1):
        want = want * (1 + (want < dram_bytes_per_cycle))  # doubles while narrower than asked
    for lanes in (rows, cols):
        size = lanes * (input_bits // 8) // (1 + packed)
        power = size & -size
        want = want + (power - want) * (power < want)
    return want + (QPARAM_LANE_BYTES - want) * ((QPARAM_LANE_BYTES < want) & input_stationary)


def queue_entry_commands(data_bytes: int) -> int:
    """Commands per command-queue entry on a ``data_bytes`` bus: one, or ``data_bytes / 32`` when a
    beat holds several (the sequencer stores one beat per entry then)."""
    return max(1, data_bytes // COMMAND_BYTES)


def fetch_beats(commands: int, data_bytes: int) -> int:
    """AXI beats of fetching a program of ``commands`` commands: ``ceil(commands * 32 / W)``
    (whole beats; the last may run past the program, module docstring)."""
    return -(-commands * COMMAND_BYTES // data_bytes)


def dram_word_lanes(rows: int, cols: int, input_stationary: bool) -> dict[str, int]:
    """Lanes of one buffer word, by kind: ``ifmap``, ``weight``, ``ofmap`` (raw), ``qparam``,
    ``requant`` (requantised ofmap); a transfer's ``lanes`` of 0 moves them all."""
    return {"ifmap": cols if input_stationary else rows, "weight": rows if input_stationary else cols,
            "ofmap": cols, "qparam": 1 if input_stationary else cols, "requant": cols}


def transfer_beats(word_bytes: int, word_lanes: int, lanes: int, data_bytes: int) -> int | None:
    """AXI beats one word of a transfer with ``lanes`` (0: all ``word_lanes``) takes in DRAM, for a
    word of ``word_bytes`` bytes and ``word_lanes`` lanes on a ``data_bytes`` bus; ``None`` when
    ``lanes`` is above ``word_lanes`` or its bytes are not whole beats (``ERROR_DRAM``)."""
    if lanes == 0:
        return word_bytes // data_bytes
    size, part = divmod(lanes * word_bytes, word_lanes)  # a packed int4 lane is half a byte
    if lanes > word_lanes or part or size % data_bytes:
        return None
    return size // data_bytes


def dram_word_bytes(rows: int, cols: int, input_stationary: bool, input_bits: int, acc_bits: int,
                    packed: frozenset[str] = frozenset()) -> dict[str, int]:
    """Bytes of one buffer word in DRAM, by kind: ``ifmap``, ``weight``, ``ofmap`` (raw),
    ``qparam``, ``requant`` (requantised ofmap) and ``command`` (``input_stationary``: IS);
    ``packed``: the kinds whose lanes are packed int4, half a byte each (module docstring)."""
    lanes = dram_word_lanes(rows, cols, input_stationary)
    full = {
        "ifmap": lanes["ifmap"] * dram_lane_bytes(Buffer.IFMAP, input_bits, acc_bits),
        "weight": lanes["weight"] * dram_lane_bytes(Buffer.WEIGHT, input_bits, acc_bits),
        "ofmap": lanes["ofmap"] * dram_lane_bytes(Buffer.OFMAP, input_bits, acc_bits),
        "qparam": lanes["qparam"] * dram_lane_bytes(Buffer.QPARAM, input_bits, acc_bits),
        "requant": lanes["ofmap"] * dram_lane_bytes(Buffer.OFMAP, input_bits, acc_bits, requant=True),
        "command": COMMAND_BYTES,
    }
    return {kind: size // 2 if kind in packed else size for kind, size in full.items()}


def store_read_latency(requant: bool) -> int:
    """Cycles from a ``STORE``'s ofmap read to its word at the DMA: the buffer read (1), plus the
    output stage's :data:`OUTPUT_STAGE_LATENCY` with ``requant``."""
    return 1 + (OUTPUT_STAGE_LATENCY if requant else 0)


#: Words the store path holds between the buffer read and the W channel (reads in flight
#: included): the requantised read latency plus 2, the least with which a store of one-beat
#: words still sends a beat every cycle (a word read in cycle ``r`` leaves in ``r + latency + 1``
#: and frees its place the cycle after).
STORE_FIFO_WORDS = store_read_latency(True) + 2


def move_cycles(rows: int, words: int) -> int:
    """Cycles a ``MOVE`` of ``rows x words`` words keeps the DMA unit busy: one ofmap read a cycle,
    each word written to the ifmap :func:`store_read_latency` ``(True)`` cycles after its read;
    0 for an empty move. Issued at edge ``E_d``, the unit is busy from cycle ``d + 1`` to ``d + n``."""
    count = rows * words
    return count + store_read_latency(True) if count else 0

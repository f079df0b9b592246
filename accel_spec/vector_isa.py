"""The vector unit's instruction set: op codes, register values and timing constants (stdlib only).

The vector unit (``rtl_gen.core.vector_unit``) runs one vector op per ``start`` on rows held in
on-chip words of ``lanes`` int8 lanes; the model (``perf_model.vector_timing``) and the compiler
(``perf_model.compiler.vector``) read the same constants here, as the matrix side reads
``accel_spec.isa``. A vector op is ``rows`` rows of ``words`` words each (row ``r`` at word
``base + r * words``; element ``k`` of a row in lane ``k % lanes`` of word ``k // lanes``; lanes
past ``n`` in a row's last word are padding: ignored by reductions, unspecified on output).

Per row the unit runs the phases of :data:`PHASES` (``P`` a pass over the row's words, ``S`` a
scalar step of fixed cycles); an element-wise op is one pass (the compiler gives it one row of
all its words). Busy cycles of one op::

    1 + rows * (passes * (words + PASS_TAIL) + scalar cycles)

``PASS_TAIL``: a word read at cycle ``t`` is computed at ``t + 1`` and reduced or written at
``t + 2``. Scalar steps: ``MEAN`` (load, ``DIV_STEPS`` divide steps, finish), ``RSQRT``
(``q`` and its normalising shift, ``SQRT_STEPS`` root steps, load, ``DIV_STEPS``, finish),
``RECIP`` (load, ``DIV_STEPS``, finish).

RoPE (``rope``) runs one rotation phase ``R`` a row: a row is one (token, head) vector of ``n = dh``
elements, ``words = dh / lanes`` (the unit takes ``dh / 2`` in whole words, ``H = words / 2``),
word ``j < H`` of the first half paired with word ``j + H`` of the second. The second operand
(``src2``) is the op's table, one row of :data:`ROPE_TABLE_WORDS` ``* words`` words per position
shared by the ``qrows`` rows of that position (its heads; row ``r`` reads table row ``r //
qrows``, re-read for each row): for each ``j``, the low bytes of ``cos``, their high bytes, the
low bytes of ``sin``, their high bytes (:func:`rope_table_row`). Per ``j`` the unit issues four
reads (``x1_j`` and the cos low word, ``x2_j`` and the cos high word, then the two sin words),
each lane forms ``x1 cos`` and ``x2 cos`` at the second and ``x2 sin`` and ``x1 sin`` at the fourth
(the two multipliers of the rescaling add), and writes output word ``j``, then ``j + H`` the cycle
after. Busy cycles::

    1 + rows * (2 * words + PASS_TAIL + 1)

(``2 * words`` issue cycles, the last pair's first output word ``PASS_TAIL`` cycles after its last
read and its second one cycle later).

Pooling (``maxpool``, ``avgpool``) walks windows instead of rows: a run is ``rows`` NHWC images
of ``in_h x in_w`` pixels of ``words_c`` words (``n`` channels, ``ceil(n / lanes)`` words; the
command's ``words`` is a whole image's ``in_h * in_w * words_c``), its output ``out_h x out_w``
pixels packed the same way. Per output word (pixel ``(oy, ox)``, channel word ``c``) the unit
reads the window's in-image pixels only, one word a cycle, keeps each lane's max or sum, and
writes the word two cycles after the last read (:data:`PASS_TAIL`). Busy cycles::

    2 + rows * words_c * (Vy * Vx + PASS_TAIL * out_h * out_w)

``Vy = sum over oy of the window rows inside the image`` (``Vx`` the same over ``ox``); the 2 are
the set-up cycles of the window address generator (pitches, then the first window's origin). An
average is ``rdiv(sum, window_h * window_w)`` (padding counts in the divisor), taken per lane
by an exact multiply (:func:`pool_divisor`).

Transpose (``transpose``) reorders a matrix held on chip, the layout no GEMM output gives: its
input is ``rows`` rows (``R``) of ``words`` words (``W``) of ``n`` elements, row ``r`` at ``src + r
* W``; its output is ``n`` rows of ``R`` elements, row ``j`` at ``dst + j * P`` (``P``, the output
row pitch in words, is parameter register 0, at least ``ceil(R / lanes)``; only the row's first
``ceil(R / lanes)`` words are written, lanes past ``R`` in the last one as 0), element ``r`` of
output row ``j`` being element ``j`` of input row ``r``. The unit holds a ``lanes x lanes`` tile of
int8 registers. It walks blocks of ``lanes`` input rows (``RB = ceil(R / lanes)`` blocks, the last
one the rest, ``rin`` rows), and within a block the ``W`` input words: it reads word ``t`` of each
of the block's rows (``rin`` reads, one a cycle, into the tile's rows), waits one cycle for the
last one, then writes ``wout = min(lanes, n - t * lanes)`` output words (rows ``t * lanes ..``,
word ``b`` of each: the tile's columns), one a cycle. Busy cycles::

    1 + RB * W + R * W + RB * n

(``1``: set-up; per block and word ``rin + 1 + wout``). The output region must not overlap the
input (later blocks read after earlier ones wrote). The sequencer checks it as ``n * P`` words
from ``dst`` and holds ``P * lanes >= R``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["PARAM_FIELDS", "param_error", "VECTOR_CODES", "PHASES", "PASS_TAIL", "DIV_STEPS", "SQRT_STEPS",
           "SCALAR_CYCLES", "NPARAMS", "silu_table", "magic_divisor", "unit_params", "UNIT_KINDS", "SOFTMAX_Z_BITS",
           "POOL_KINDS", "POOL_MAX_WINDOW", "PoolGeometry", "pool_geometry", "pool_divisor", "pool_cycles",
           "pool_registers", "pool_from_registers", "ROPE_FRAC", "ROPE_TABLE_WORDS", "rope_table_row",
           "transpose_cycles", "rope_table_span"]

#: Op code of each kind the unit runs (the VECTOR command's ``vkind`` field); 0 is invalid.
VECTOR_CODES = {"add": 1, "mul": 2, "relu": 3, "relu6": 4, "gelu": 5, "silu": 6, "layernorm": 7, "rmsnorm": 8,
                "softmax": 9, "maxpool": 10, "avgpool": 11, "rope": 12, "transpose": 13}
UNIT_KINDS = tuple(VECTOR_CODES)
#: Cycles from a pass's last read to its last reduction or write (read, compute, reduce/write).
PASS_TAIL = 2
#: Steps of the unit's serial divider (one quotient bit per cycle, 32-bit numerators).
DIV_STEPS = 32
#: Steps of its digit-by-digit integer square root (two bits of a 32-bit radicand per cycle).
SQRT_STEPS = 16
#: Cycles of each scalar step between passes.
SCALAR_CYCLES = {"MEAN": DIV_STEPS + 2, "RSQRT": 2 + SQRT_STEPS + DIV_STEPS + 2, "RECIP": DIV_STEPS + 2}
#: The phases of one row, per kind (element-wise kinds: one writing pass).
PHASES: dict[str, tuple[str, ...]] = {
    **{k: ("P",) for k in ("add", "mul", "relu", "relu6", "gelu", "silu")},
    "layernorm": ("P", "MEAN", "P", "RSQRT", "P"),
    "rmsnorm": ("P", "MEAN", "P", "RSQRT", "P"),
    "softmax": ("P", "P", "RECIP", "P"),
    "maxpool": ("W",),
    "avgpool": ("W",),
    "rope": ("R",),
    "transpose": ("X",),
}
#: The pooling kinds (one window walk, phase ``W``).
POOL_KINDS = ("maxpool", "avgpool")
#: Most window positions of an average (its divide is exact for sums of up to this many codes).
POOL_MAX_WINDOW = 4095
#: Parameter registers of the unit (32-bit, signed).
NPARAMS = 8
#: Fraction bits of a RoPE table's int16 ``cos`` and ``sin`` (``round(2**14 cos)``; the unit's output shift).
ROPE_FRAC = 14
#: Words of a RoPE table row per word of the rotated row (cos and sin, 16 bits each, in int8 lanes).
ROPE_TABLE_WORDS = 2
#: Bits of the clamped i-exp argument whose quotient by ``ln2`` the unit takes by a multiply.
SOFTMAX_Z_BITS = 20


_NORM_FIELDS = (("n", 24, False), ("half_n", 24, False), ("rsqrt_c14", 30, False), ("out_shift", 5, False),
                ("eps", 31, False), ("shift_base", 8, True), ("center", 1, False))
#: Each kind's parameter registers as ``(field name, bits, signed)``: the unit reads those bits
#: (its multipliers are that wide); :func:`param_error` holds the compiler's values to them.
PARAM_FIELDS: dict[str, tuple[tuple[str, int, bool], ...]] = {
    "add": (("mult_a", 23, False), ("mult_b", 23, False), ("shift", 5, False)),
    "mul": (("mul_a", 1, False), ("mul_b", 1, False), ("shift", 5, False)),
    "relu": (),
    "relu6": (("act_max", 8, True),),
    "gelu": (("gelu_mult", 16, False), ("clip", 15, False), ("gelu_a", 15, False)),
    "silu": (("gated", 1, False),),
    "layernorm": _NORM_FIELDS,
    "rmsnorm": _NORM_FIELDS,
    "softmax": (("in_mult", 23, False), ("ln2", 16, False), ("poly_b", 17, False), ("exp_a", 15, False),
                ("poly_c", 15, False), ("causal_offset", 32, True), ("z_mult", 24, False), ("z_shift", 6, False)),
    # in_hw = in_h | in_w << 16, out_hw likewise, window = window_h | window_w << 16,
    # step = stride_h | stride_w << 8 | pad_h << 16 | pad_w << 24, pool_bias_shift = bias | shift << 24,
    # out_words = out_h * out_w * words_c (the sequencer's range check of the output; pool_registers packs them)
    **{kind: (("in_hw", 32, False), ("out_hw", 32, False), ("window", 32, False), ("step", 32, False),
              ("words_c", 24, False), ("pool_mult", 22, False), ("pool_bias_shift", 30, False),
              ("out_words", 32, False))
       for kind in POOL_KINDS},
    # RoPE's table is an operand (src2), its rows per position the VECTOR command's vqrows
    "rope": (),
    # the output's row pitch in words (at least ceil(rows / lanes))
    "transpose": (("out_pitch", 24, False),),
}


def _rshr(v: int, s: int) -> int:
    return v if s == 0 else (v + (1 << (s - 1))) >> s


def param_error(kind: str, regs: tuple[int, ...]) -> str:
    """Why the unit cannot take registers ``regs`` of ``kind`` (``""``: it can): a value outside
    its field, or a softmax whose i-exp would leave the bounds the unit's widths rely on
    (``e < 2**15``, the clamp at ``16 ln2`` inside ``2**SOFTMAX_Z_BITS``)."""
    for (name, bits, sign), value in zip(PARAM_FIELDS[kind], regs, strict=False):
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1))) if sign else (0, 1 << bits)
        if not low <= value < high:
            return f"{kind}: parameter {name} = {value} is outside the unit's {bits}-bit field"
    if kind == "softmax":
        ln2, poly_b, poly_a, poly_c = regs[1], regs[2], regs[3], regs[4]
        top = _rshr(poly_b, 2)
        e_max = _rshr(poly_a * _rshr(top * top, 14), 15) + poly_c
        if not 0 < ln2 <= poly_b or ln2 << 4 >= 1 << SOFTMAX_Z_BITS or e_max >= 1 << 15:
            return f"{kind}: i-exp constants ln2 = {ln2}, poly_b = {poly_b}, poly_a = {poly_a}, poly_c = {poly_c} " \
                   "leave the unit's bounds"
    return ""


@lru_cache(maxsize=1)
def silu_table() -> tuple[int, ...]:
    """``T[c + 128] = round(2**11 * silu(c / 16))`` for codes ``c`` in -128..127 (the unit's ROM)."""
    return tuple(round((c / 16) / (1 + math.exp(-c / 16)) * 2048) for c in range(-128, 128))


def magic_divisor(d: int, bits: int) -> tuple[int, int]:
    """``(mult, shift)`` with ``floor(a / d) == (a * mult) >> shift`` for every ``0 <= a < 2**bits``.

    ``l = bitlen(d)``, ``shift = bits + l``, ``mult = ceil(2**shift / d)``: then ``mult * d - 2**shift
    < d <= 2**l``, which makes the floor exact on that range (Granlund and Montgomery, 1994, thm 4.2).
    """
    if d < 1:
        raise ValueError(f"divisor must be positive, not {d}")
    shift = bits + d.bit_length()
    return -(-(1 << shift) // d), shift


@dataclass(frozen=True)
class PoolGeometry:
    """One pooling run's window walk: ``in_h x in_w`` pixels of ``words_c`` words in, ``out_h x
    out_w`` out, the window, its strides and its (symmetric) padding."""

    kind: str
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    window_h: int
    window_w: int
    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    words_c: int

    def inside(self, axis: int) -> int:
        """Window positions inside the image summed over the outputs along ``axis`` (0: rows, 1:
        columns): ``Vy`` or ``Vx`` of the module docstring."""
        size, out, win, stride, pad = ((self.in_h, self.out_h, self.window_h, self.stride_h, self.pad_h) if axis == 0
                                       else (self.in_w, self.out_w, self.window_w, self.stride_w, self.pad_w))
        return _inside(size, out, win, stride, pad)


@lru_cache(maxsize=256)
def _inside(size: int, out: int, win: int, stride: int, pad: int) -> int:
    total = 0
    for o in range(out):
        first = o * stride - pad
        total += max(0, min(win, size - first) - max(0, -first))
    return total


def pool_geometry(kind: str, shape: tuple[int, ...], params: dict[str, int], lanes: int) -> PoolGeometry | str:
    """The window walk of pooling op ``kind`` on NHWC ``shape`` with record ``params``
    (``window_h`` .. ``pad_w``) on ``lanes`` lanes, or why the unit cannot run it (one line)."""
    if len(shape) != 4:
        return f"{kind}: the vector unit pools NHWC images, not a {len(shape)}-d input"
    _, in_h, in_w, channels = shape
    try:
        wh, ww, sh, sw, ph, pw = (int(params[k]) for k in ("window_h", "window_w", "stride_h", "stride_w", "pad_h",
                                                            "pad_w"))
    except KeyError as missing:
        return f"{kind}: the record has no parameter {missing}"
    if min(wh, ww, sh, sw) < 1 or min(ph, pw) < 0:
        return f"{kind}: window {wh}x{ww}, stride {sh}x{sw} and padding {ph}x{pw} must be positive (padding >= 0)"
    out_h, out_w = (in_h + 2 * ph - wh) // sh + 1, (in_w + 2 * pw - ww) // sw + 1
    if out_h < 1 or out_w < 1:
        return f"{kind}: a {wh}x{ww} window does not fit the padded {in_h}x{in_w} image"
    if max(in_h, in_w, wh, ww) >= 1 << 16 or max(sh, sw, ph, pw) >= 1 << 8:
        return (f"{kind}: image {in_h}x{in_w}, window {wh}x{ww}, stride {sh}x{sw} or padding {ph}x{pw} exceeds the "
                "unit's 16-bit sizes and 8-bit strides and pads")
    if kind == "avgpool" and wh * ww > POOL_MAX_WINDOW:
        return f"{kind}: a {wh}x{ww} window averages {wh * ww} codes, the unit's exact divide takes {POOL_MAX_WINDOW}"
    return PoolGeometry(kind, in_h, in_w, out_h, out_w, wh, ww, sh, sw, ph, pw, -(-channels // lanes))


def pool_divisor(count: int) -> tuple[int, int, int]:
    """``(mult, shift, bias)`` with ``rdiv(s, count) == ((s + bias) * mult >> shift) - 128`` for
    every sum ``s`` of ``count`` int8 codes: ``bias = 128 count + count // 2`` makes the numerator
    non-negative and below ``256 count``, where :func:`magic_divisor` is exact."""
    mult, shift = magic_divisor(count, (256 * count).bit_length())
    return mult, shift, 128 * count + count // 2


def pool_registers(g: PoolGeometry) -> tuple[int, ...]:
    """The :data:`NPARAMS` registers of a pooling run (``PARAM_FIELDS``' packing)."""
    mult, shift, bias = pool_divisor(g.window_h * g.window_w) if g.kind == "avgpool" else (0, 0, 0)
    return (g.in_h | g.in_w << 16, g.out_h | g.out_w << 16, g.window_h | g.window_w << 16,
            g.stride_h | g.stride_w << 8 | g.pad_h << 16 | g.pad_w << 24, g.words_c, mult, bias | shift << 24,
            g.out_h * g.out_w * g.words_c)


def pool_cycles(g: PoolGeometry, rows: int) -> int:
    """Busy cycles of a pooling run over ``rows`` images (module docstring)."""
    return 2 + rows * g.words_c * (g.inside(0) * g.inside(1) + PASS_TAIL * g.out_h * g.out_w)


def pool_from_registers(kind: str, regs: tuple[int, ...]) -> PoolGeometry:
    """The geometry a pooling command's parameter registers hold (the inverse of :func:`pool_registers`)."""
    r = [v & 0xFFFFFFFF for v in regs]
    return PoolGeometry(kind, r[0] & 0xFFFF, r[0] >> 16, r[1] & 0xFFFF, r[1] >> 16, r[2] & 0xFFFF, r[2] >> 16,
                        r[3] & 0xFF, (r[3] >> 8) & 0xFF, (r[3] >> 16) & 0xFF, r[3] >> 24, r[4])


def rope_table_span(rows: int, words: int, qrows: int) -> int:
    """Ifmap words from ``vsrc2`` the sequencer checks for a RoPE's table (module docstring of
    ``accel_spec.isa``): ``2 * rows * words`` when ``qrows`` is 1, else ``rows * words + 2 * words``,
    a bound of its ``ceil(rows / qrows)`` rows of ``2 * words`` that needs no divider. A compiler
    keeps this many words free from the table's start."""
    return 2 * rows * words if qrows == 1 else rows * words + 2 * words


def transpose_cycles(rows: int, words: int, n: int, lanes: int) -> int:
    """Busy cycles of a transpose of ``rows`` rows of ``words`` words (``n`` elements a row) on
    ``lanes`` lanes (module docstring): ``1 + RB * W + R * W + RB * n``, ``RB = ceil(R / lanes)``."""
    blocks = -(-rows // lanes)
    return 1 + blocks * words + rows * words + blocks * n


def rope_table_row(cos: list[int], sin: list[int], lanes: int) -> list[int]:
    """One position's RoPE table row as the unit reads it: ``2 * len(cos)`` int16 values as
    ``4 * len(cos)`` int8 codes, word ``4 j + k`` (``lanes`` codes) holding, in lane ``l``, element
    ``i = j * lanes + l``'s ``cos`` low byte (``k = 0``), high byte (1), ``sin`` low byte (2), high
    byte (3); a low byte as a code in -128..127 (its bits are the byte's).

    Raises:
        ValueError: ``len(cos)`` is not whole words of ``lanes``, or a value is outside int16.
    """
    half = len(cos)
    if len(sin) != half or half % lanes:
        raise ValueError(f"a RoPE table row takes cos and sin of whole words of {lanes} lanes, not {half}, {len(sin)}")
    out: list[int] = []
    for j in range(half // lanes):
        for table, high in ((cos, False), (cos, True), (sin, False), (sin, True)):
            for v in table[j * lanes:(j + 1) * lanes]:
                if not -(1 << 15) <= v < 1 << 15:
                    raise ValueError(f"a RoPE table value must be int16, not {v}")
                byte = (v >> 8) & 0xFF if high else v & 0xFF
                out.append(byte - 256 if byte >= 128 else byte)
    return out


def unit_params(kind: str, params: dict[str, int], n: int) -> tuple[int, ...]:
    """The :data:`NPARAMS` parameter registers of op ``kind`` with record ``params`` over rows of ``n``.

    add: mult_a, mult_b, shift; mul: shift; relu6: act_max; gelu: in_mult, clip, poly_a; silu:
    gated; layernorm/rmsnorm: ``n``, ``n // 2``, ``rsqrt_const << 14``, ``10 + rsqrt_bits``, eps,
    ``bitlen(n - 1) - 28``, center; softmax: in_mult, ln2, poly_b, poly_a, poly_c, causal_offset,
    and the multiplier and shift of ``floor(a / ln2)`` for ``a < 2**SOFTMAX_Z_BITS``.
    """
    p = params
    if kind == "add":
        regs = [p["mult_a"], p["mult_b"], p["shift"]]
    elif kind == "mul":
        regs = [0, 0, p["shift"]]
    elif kind == "relu6":
        regs = [p["act_max"]]
    elif kind == "gelu":
        regs = [p["in_mult"], p["clip"], p["poly_a"]]
    elif kind == "silu":
        regs = [p["gated"]]
    elif kind in ("layernorm", "rmsnorm"):
        regs = [n, n // 2, p["rsqrt_const"] << 14, 10 + p["rsqrt_bits"], p["eps"], (n - 1).bit_length() - 28,
                int(kind == "layernorm")]
    elif kind == "softmax":
        mult, shift = magic_divisor(p["ln2"], SOFTMAX_Z_BITS)
        regs = [p["in_mult"], p["ln2"], p["poly_b"], p["poly_a"], p["poly_c"], p["causal_offset"], mult, shift]
    else:
        regs = []
    return tuple(regs + [0] * (NPARAMS - len(regs)))

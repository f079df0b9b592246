"""The compiler: the model's tiling of one GEMM, as a command program for the accelerator's queue.

``compile_gemm`` turns :func:`~perf_model.compiler.plan.plan_tiles` into commands
(:mod:`accel_spec.isa`) and a DRAM layout. The same program is what the RTL runs
(``simulate``, ``export``) and what :func:`perf_model.program_timing.program_cycles` times, so
model and RTL are one machine.

DRAM layout (byte addresses; every tensor starts on a 4 KiB boundary, after the program, so the
last beat of the program's fetch, which on a bus wider than one command may run up to ``W - 32``
bytes past the last command, stays inside the image; ``accel_spec.isa``): the
matrices are stored so that one buffer word is one contiguous run of lanes (``R x C`` array,
rows padded with zeros to whole words)::

    dataflow   A (M x K)        B (K x N)        C (M x N)
    WS         A   rows of K    B   rows of N    C   rows of N
    OS         A^T rows of M    B   rows of N    C   rows of N
    IS         A^T rows of M    B^T rows of K    C^T rows of M

A row holds ``ceil(len / lanes) * lanes`` elements (``lanes`` of the buffer the matrix goes to),
or, when ``len < lanes``, ``len`` rounded up to a power of two of AXI beats (:func:`dense_row_elems`), each
of ``dram_lane_bytes`` bytes. A transfer whose tile rows are shorter than a word (such a
matrix, or the last tile of a longer row) is narrow: its ``lanes`` field is the tile's length
in a power of two of whole beats (:func:`narrow_lanes`), so its zero lanes are made on chip, not read. Elements are
inputs ``input_bits / 8``, C raw accumulators (4 or 8 bytes) or,
requantised, ``input_bits / 8``. The output stage's parameters (requantised ops) are one row of
16-byte lanes per channel, ``ceil(N / C) * C`` (WS/OS) or ``N`` (IS) lanes.

Schedule, per run of the plan (output tiles whole: the K tiles of one output tile run back to
back, accumulating in the ofmap). Single buffered, everything in series: the run's changed
input tiles are loaded (``wait_run``: the previous run has finished reading them), the run
waits for the loads (``wait_dma``), and an output tile is stored when its last run is done.
Double buffered (``double_buffered``): each buffer is used as two halves (words ``[0, H)`` and
``[H, 2H)``, ``H = depth // 2``); a tile goes to the half its predecessor in that buffer did not
use. The order ``RUN(i), STORE(part j of the previous output tile), LOAD(inputs of run i+1),
RUN(i+1)`` with ``RUN(i+1)`` waiting for the DMA, so the loads of the next run and a part of the
previous output tile's store overlap run ``i``: the ping-pong the model scores. An output tile
is stored in as many parts (runs of consecutive DRAM rows, as even as whole rows allow) as the
next output tile has runs, the ``j``-th after that tile's ``j``-th RUN, so a large tile's store
is spread over the K loop instead of stalling one run; the last output tile is stored whole
after the last run.

A resident input (``TilePlan.resident``: the plan's strip, :mod:`perf_model.evaluator.tiling`) is placed
as a strip: its K sub-tile ``j`` at ``j`` full sub-tiles past the strip's base (in the half of
the strip when double buffered), loaded by the first run that needs it and read by the RUN
commands of later runs at that address, so it crosses the DRAM interface once per strip.

On-chip reuse (``perf_model.compiler.chain``; WS with ``R == C``, or IS; a requantised op): ``c_region``
sends the output to the ifmap instead of DRAM, each STORE becoming a ``MOVE`` of the same words to
the next layer's ``A`` in the ifmap layout of a run over the whole matrix: word ``c_region + (n //
C) * M + m`` (WS) or ``c_region + (m // C) * N + n`` (IS); the A tiles then use only the ifmap
words below ``ifmap_words``. ``a_region`` is the other end: the whole ``A`` already sits in the
ifmap from ``a_region`` on in that layout, so no A tile is loaded and each RUN reads its A tile in
place (its base at the tile's first word, ``a_stride`` ``M`` (WS) or ``K`` (IS) between folds).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import (
    COMMAND_BYTES,
    QUEUE_DEPTH,
    Buffer,
    Command,
    Opcode,
    axi_data_bytes,
    dram_lane_bytes,
    queue_entry_commands,
)
from perf_model import timing
from perf_model.compiler.plan import plan_tiles
from perf_model.evaluator.reuse_links import can_move
from workloads.ops import Gemm

__all__ = ["TensorLayout", "GemmProgram", "compile_gemm", "output_major", "reuse_possible", "QPARAM_CHANNELS",
           "PAGE", "dense_row_elems", "narrow_lanes"]

#: Channels the output stage's parameter buffer holds (``rtl_gen``'s ``QPARAM_CHANNELS``).
QPARAM_CHANNELS = 4096
#: Alignment of every tensor in DRAM, bytes.
PAGE = 4096


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    """One matrix in DRAM: ``rows`` rows of ``row_elems`` elements of ``elem_bytes`` bytes.

    ``transposed``: the rows are the matrix's columns (A^T, B^T, C^T of the module docstring).
    ``shape``: the matrix's own ``(P, Q)``; the stored rows hold the first dims, padded.
    ``packed``: int4 elements two a byte (``accel_spec.isa``, "Packed int4": element ``2i``
    of a row in the low nibble of byte ``i``); ``elem_bytes`` is then 1 and each takes half.
    """

    name: str
    base: int
    rows: int
    row_elems: int
    elem_bytes: int
    transposed: bool
    shape: tuple[int, int]
    packed: bool = False

    @functools.cached_property
    def elem_size(self) -> Fraction | int:
        """Bytes one element takes in DRAM (1/2 packed)."""
        return Fraction(self.elem_bytes, 2) if self.packed else self.elem_bytes

    @functools.cached_property
    def pitch(self) -> int:
        """Bytes from one row to the next."""
        return int(self.row_elems * self.elem_size)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies."""
        return self.rows * self.pitch


@dataclasses.dataclass(frozen=True)
class GemmProgram:
    """The commands and the DRAM layout of one GEMM instance on one design.

    Attributes:
        commands: the program, in queue order.
        tensors: ``a``, ``b``, ``c`` (and ``q`` for a requantised op) layouts.
        queue_base: byte address of the program (0).
        dram_bytes: bytes of DRAM the program and its tensors span.
        data_bytes: AXI data width.
        requant: whether C leaves through the output stage.
        runs: the plan's tiles ``(m0, m1, k0, k1, n0, n1, accumulate)``, in run order.
        chunks: ``(first, end)`` command indices of each queue-load: a program longer than the
            command queue runs as consecutive programs (the host starts each after the last
            one's interrupt), chunk ``j`` at byte ``queue_base + first * COMMAND_BYTES`` (a multiple
            of the bus width: ``queue_depth`` is a multiple of the commands a beat holds).
    """

    commands: tuple[Command, ...]
    tensors: dict[str, TensorLayout]
    queue_base: int
    dram_bytes: int
    data_bytes: int
    requant: bool
    runs: tuple[tuple[int, ...], ...]
    chunks: tuple[tuple[int, int], ...]


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def _lanes(config: ArrayConfig) -> dict[str, int]:
    r, c = config.rows, config.cols
    if config.dataflow is Dataflow.IS:
        return {"a": c, "b": r, "c": c}
    return {"a": r, "b": c, "c": c}


def _transposed(dataflow: Dataflow) -> dict[str, bool]:
    return {"a": dataflow is not Dataflow.WS, "b": dataflow is Dataflow.IS, "c": dataflow is Dataflow.IS}


def output_major(tiles: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The same runs, grouped so that all K tiles of one output tile run back to back.

    The ofmap buffer holds the partial sums of one run's output tile, so the runs accumulating
    into one output tile must be consecutive. A plan whose loop order already has K innermost
    (or K unsplit) comes back unchanged; otherwise each output tile's runs move up to its first
    run. The set of runs, hence the compute cycles, is the same.
    """
    groups: dict[tuple[int, int, int, int], list[tuple[int, ...]]] = {}
    for tile in tiles:
        groups.setdefault((tile[0], tile[1], tile[4], tile[5]), []).append(tile)
    return [tile for group in groups.values() for tile in sorted(group, key=lambda t: t[2])]


def compile_gemm(config: ArrayConfig, gemm: Gemm, *, requant: bool = False, queue_depth: int = QUEUE_DEPTH,
                 a_region: int | None = None, c_region: int | None = None,
                 ifmap_words: int | None = None) -> GemmProgram:
    """The program of one ``m x k x n`` instance of ``gemm`` on ``config`` (module docstring).

    Args:
        config, gemm, requant, queue_depth: the design, the GEMM, whether C leaves through the
            output stage, commands per queue-load.
        a_region: ifmap word where the whole A already is (on-chip reuse), or ``None``.
        c_region: ifmap word where C goes as the next layer's A (on-chip reuse), or ``None``.
        ifmap_words: ifmap words the A tiles may use (default: the whole buffer).

    Raises:
        ModelError: the design cannot run the GEMM (the plan's reason), a requantised op with
            more than :data:`QPARAM_CHANNELS` channels, a tile that does not fit its buffer, or
            reuse on a design or op that cannot have it.
    """
    if (a_region is not None or c_region is not None) and not reuse_possible(config):
        raise ModelError(f"design {config.short_name()} cannot keep a layer on chip: on-chip reuse needs a "
                         f"weight-stationary array with rows == cols, or an input-stationary one")
    if c_region is not None and not requant:
        raise ModelError("only a requantised output can stay on chip (c_region needs requant)")
    depths = _buffer_depths(config)
    reserve = 0 if ifmap_words is None else depths[0] - ifmap_words
    if not 0 <= reserve < depths[0]:
        raise ModelError(f"ifmap_words must be in 1 .. {depths[0]}, not {ifmap_words}")
    plan = plan_tiles(config, gemm, ifmap_reserve=reserve, a_on_chip=a_region is not None)
    if not plan.feasible:
        raise ModelError(f"design {config.short_name()} cannot run {gemm.m}x{gemm.k}x{gemm.n}: {plan.reason}")
    m, k, n = plan.m, plan.k, plan.n
    if requant and n > QPARAM_CHANNELS:
        raise ModelError(f"a requantised op has at most {QPARAM_CHANNELS} output channels, not n={n}")
    W = axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                       config.dataflow is Dataflow.IS, bool(config.packed_kinds))
    lanes = _lanes(config)
    tr = _transposed(config.dataflow)
    ib, ab = config.input_bits, config.acc_bits
    elem = {"a": dram_lane_bytes(Buffer.IFMAP, ib, ab), "b": dram_lane_bytes(Buffer.WEIGHT, ib, ab),
            "c": dram_lane_bytes(Buffer.OFMAP, ib, ab, requant=requant)}
    kinds = {"a": "ifmap", "b": "weight", "c": "requant" if requant else "ofmap"}
    packed = {name: kind in config.packed_kinds for name, kind in kinds.items()}
    shapes = {"a": (m, k), "b": (k, n), "c": (m, n)}
    runs = output_major([tuple(int(v) for v in t) for t in plan.tiles()])
    # Upper bound on the program length, to place the tensors after it.
    upper = 2 + 4 * len(runs)
    base = _align(upper * COMMAND_BYTES, PAGE)
    tensors: dict[str, TensorLayout] = {}
    for name in ("a", "b", "c"):
        p, q = shapes[name]
        rows, cols = (q, p) if tr[name] else (p, q)
        size = Fraction(elem[name], 2 if packed[name] else 1)
        t = TensorLayout(name, base, rows, dense_row_elems(cols, lanes[name], size, W), elem[name], tr[name],
                         (p, q), packed[name])
        tensors[name] = t
        base = _align(base + t.nbytes, PAGE)
    if requant:
        q_lanes = n if config.dataflow is Dataflow.IS else _align(n, config.cols)
        tensors["q"] = TensorLayout("q", base, 1, q_lanes, 16, False, (1, n))
        base = _align(base + tensors["q"].nbytes, PAGE)
    depth = dict(zip(("a", "b", "c"), depths, strict=True))
    depth["a"] -= reserve
    half = {b: (d // 2 if config.double_buffered else 0) for b, d in depth.items()}
    cmds = _Builder(config, tensors, lanes, W, (m, k, n), a_region, c_region)
    if requant:
        qt = tensors["q"]
        per_word = 1 if config.dataflow is Dataflow.IS else config.cols
        cmds.add(Command.make(Opcode.LOAD, buffer=Buffer.QPARAM, dram_addr=qt.base, dram_stride=qt.pitch, rows=1,
                              words=qt.row_elems // per_word, buf_addr=0, row_step=0, word_step=1))
    room = half if config.double_buffered else depth
    resident = "" if a_region is not None and plan.resident == "a" else plan.resident  # A is never loaded
    placed = _place(cmds, runs, room, half, resident, plan.kt,
                    ("b", "c") if a_region is not None else ("a", "b", "c"))
    (_double if config.double_buffered else _single)(cmds, runs, placed, requant)
    if queue_depth < 1:
        raise ModelError(f"queue_depth must be a positive number of commands, not {queue_depth}")
    if queue_depth % queue_entry_commands(W):
        raise ModelError(f"queue_depth must be a multiple of {queue_entry_commands(W)} commands on a {W}-byte bus "
                         f"(each queue-load starts on a beat), not {queue_depth}")
    total = len(cmds.out)
    chunks = tuple((i, min(i + queue_depth, total)) for i in range(0, total, queue_depth))
    return GemmProgram(tuple(cmds.out), tensors, 0, base, W, requant, tuple(runs), chunks)


def dense_row_elems(length: int, lanes: int, elem_bytes: int | Fraction, data_bytes: int) -> int:
    """Elements a DRAM row of ``length`` elements holds: whole words of ``lanes``, or, shorter than
    one word, whole AXI beats (no zero lanes: its transfers are narrow, :func:`narrow_lanes`).
    ``elem_bytes``: an element's bytes in DRAM (1/2 for packed int4)."""
    if length >= lanes:
        return _align(length, lanes)
    return narrow_lanes(length, lanes, elem_bytes, data_bytes) or lanes


def narrow_lanes(across: int, lanes: int, elem_bytes: int | Fraction, data_bytes: int) -> int:
    """The ``lanes`` field of a transfer whose DRAM rows hold ``across`` elements of a word of ``lanes``:
    ``across`` rounded up to a power of two of AXI beats (so a dense row never straddles a 4 KiB
    page, as whole words do not), or 0 (the whole word) when that is not fewer lanes."""
    if across >= lanes:
        return 0
    beats = 1 << (int(-(-across * elem_bytes // data_bytes)) - 1).bit_length()
    narrow = int(beats * data_bytes // elem_bytes)
    return narrow if narrow < lanes else 0


def reuse_possible(config: ArrayConfig) -> bool:
    """Whether ``config`` can keep a layer's output on chip as the next layer's input
    (:func:`perf_model.evaluator.reuse_links.can_move`, the model's rule)."""
    return bool(can_move(timing.dataflow_code(config.dataflow.value), config.rows, config.cols))


def _buffer_depths(config: ArrayConfig) -> tuple[int, int, int]:
    """Words of the buffers holding A, B and C (``ArrayConfig.buffer_bits``: packed int4 lanes
    are 4 bits, so a packed operand's buffer holds twice the words)."""
    return _depths(config.dataflow.value, config.rows, config.cols, config.ifmap_sram_kib, config.weight_sram_kib,
                   config.ofmap_sram_kib, config.buffer_bits)


@functools.lru_cache(maxsize=1 << 12)
def _depths(dataflow: str, rows: int, cols: int, ifmap_kib: float, weight_kib: float, ofmap_kib: float,
            bits: tuple[int, int, int]) -> tuple[int, int, int]:
    """:func:`_buffer_depths` of these fields (kept: every conv of every design asks)."""
    el = timing.word_elems(timing.dataflow_code(dataflow), rows, cols)
    kib = (ifmap_kib, weight_kib, ofmap_kib)
    return tuple(int(timing.buffer_depth_words(kib[i], int(el[i]), bits[i])) for i in range(3))  # type: ignore[return-value]


class _Builder:
    """Transfer commands of tiles (the DRAM layout and the buffer word order of ``rtl_gen``)."""

    def __init__(self, config: ArrayConfig, tensors: dict[str, TensorLayout], lanes: dict[str, int], W: int,
                 dims: tuple[int, int, int] = (0, 0, 0), a_region: int | None = None,
                 c_region: int | None = None) -> None:
        self.config = config
        self.m, self.k, self.n = dims
        self.a_region = a_region
        self.c_region = c_region
        self.tensors = tensors
        self.lanes = lanes
        self.W = W
        self.out: list[Command] = []
        self.buffer = {"a": Buffer.IFMAP, "b": Buffer.WEIGHT, "c": Buffer.OFMAP}

    def add(self, command: Command) -> None:
        self.out.append(command)

    def tile_words(self, name: str, tile: tuple[int, ...]) -> int:
        _, rows, _, words = self._shape(name, tile)
        return rows * words

    def _shape(self, name: str, tile: tuple[int, ...]) -> tuple[int, int, int, int]:
        """``(first dram row, dram rows, first element of a row, words per row)`` of the tile of ``name``."""
        p0, p1, q0, q1 = _span(name, tile)
        t = self.tensors[name]
        if t.transposed:
            p0, p1, q0, q1 = q0, q1, p0, p1
        lanes = self.lanes[name]
        if q0 % lanes:
            raise ModelError(f"tile of {name.upper()} starts at column {q0}, not a whole word of {lanes} lanes")
        return p0, p1 - p0, q0, math.ceil((q1 - q0) / lanes)

    def _across(self, name: str, tile: tuple[int, ...]) -> int:
        """Elements of ``name``'s tile along its DRAM rows (the buffer words' lanes)."""
        p0, p1, q0, q1 = _span(name, tile)
        return p1 - p0 if self.tensors[name].transposed else q1 - q0

    def transfer(self, opcode: int, name: str, tile: tuple[int, ...], buf_addr: int, *, wait_run: bool = False,
                 requant: bool = False, q_base: int = 0, q_by_row: bool = False,
                 part: tuple[int, int] | None = None) -> Command:
        """The LOAD/STORE of ``name``'s tile at ``buf_addr``; ``part`` ``(r0, r1)``: only its DRAM
        rows ``r0 .. r1 - 1`` (buffer words keep their places in the whole tile)."""
        t = self.tensors[name]
        first_row, rows, q0, words = self._shape(name, tile)
        r0, r1 = part if part is not None else (0, rows)
        addr = t.base + (first_row + r0) * t.pitch + int(q0 * t.elem_size)
        fields = dict(buffer=self.buffer[name], dram_addr=addr, dram_stride=t.pitch, rows=r1 - r0, words=words,
                      buf_addr=buf_addr + r0, row_step=1, word_step=rows)
        lanes = narrow_lanes(self._across(name, tile), self.lanes[name], t.elem_size, self.W)
        if lanes:
            fields["lanes"] = lanes
        if opcode == Opcode.STORE:
            fields.update(requant=int(requant), q_base=q_base, q_by_row=int(q_by_row))
        return Command.make(opcode, wait_run=wait_run, **fields)

    def run(self, tile: tuple[int, ...], bases: dict[str, int], *, wait_dma: bool = True) -> Command:
        m0, m1, k0, k1, n0, n1, acc = tile
        is_ = self.config.dataflow is Dataflow.IS
        x, y = ("b", "a") if is_ else ("a", "b")
        stride: dict[str, int] = {}
        if self.a_region is not None:  # A read in place: WS, its k-folds M apart; IS, its m-folds K apart
            at = self.a_region + (m0 // self.config.cols * self.k + k0 if is_ else k0 // self.config.rows * self.m + m0)
            bases = {**bases, "a": at}
            stride["a_stride"] = self.k if is_ else self.m
        return Command.make(Opcode.RUN, wait_dma=wait_dma, m=m1 - m0, k=k1 - k0, n=n1 - n0, accumulate=int(acc),
                            x_base=bases[x], y_base=bases[y], o_base=bases["c"], **stride)

    def store(self, tile: tuple[int, ...], base: int, requant: bool, *, wait_run: bool,
              part: tuple[int, int] | None = None) -> Command:
        """The STORE of the output tile (or of its DRAM rows ``part``, see :meth:`transfer`); its MOVE
        into the ifmap with ``c_region``."""
        cfg = self.config
        r0 = part[0] if part is not None else 0
        is_ = cfg.dataflow is Dataflow.IS
        if is_:  # DRAM rows are channels: the parameters follow the row
            store = self.transfer(Opcode.STORE, "c", tile, base, wait_run=wait_run, requant=requant,
                                  q_base=tile[4] + r0, q_by_row=True, part=part)
        else:
            store = self.transfer(Opcode.STORE, "c", tile, base, wait_run=wait_run, requant=requant,
                                  q_base=tile[4] // cfg.cols, part=part)
        if self.c_region is None:
            return store
        # The same words into the next A: WS rows m, words n-folds; IS rows n, words m-folds.
        dst = (tile[0] // cfg.cols * self.n + tile[4] + r0) if is_ else (tile[4] // cfg.cols * self.m + tile[0] + r0)
        return Command.make(Opcode.MOVE, wait_run=wait_run, rows=store["rows"], words=store["words"],
                            buf_addr=store["buf_addr"], row_step=store["row_step"], word_step=store["word_step"],
                            q_base=store["q_base"], q_by_row=store["q_by_row"], dst_addr=self.c_region + dst,
                            dst_row_step=1, dst_word_step=self.n if is_ else self.m)

    def store_parts(self, tile: tuple[int, ...], base: int, requant: bool, parts: int) -> list[Command]:
        """The STORE of the output tile as up to ``parts`` commands of consecutive DRAM rows
        (as even as whole rows allow; none empty)."""
        rows = self._shape("c", tile)[1]
        bounds = sorted({j * rows // parts for j in range(parts + 1)})
        return [self.store(tile, base, requant, wait_run=False, part=(r0, r1))
                for r0, r1 in zip(bounds, bounds[1:], strict=False)]


def _span(name: str, tile: tuple[int, ...]) -> tuple[int, int, int, int]:
    """``(p0, p1, q0, q1)``: the rows and columns of matrix ``name`` (``a`` M x K, ``b`` K x N,
    ``c`` M x N) that ``tile`` ``(m0, m1, k0, k1, n0, n1, ...)`` covers."""
    if name == "a":
        return tile[0], tile[1], tile[2], tile[3]
    if name == "b":
        return tile[2], tile[3], tile[4], tile[5]
    return tile[0], tile[1], tile[4], tile[5]


def _keys(tile: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    m0, m1, k0, k1, n0, n1 = tile[:6]
    return {"a": (m0, m1, k0, k1), "b": (k0, k1, n0, n1), "c": (m0, m1, n0, n1)}


def _last_of_output(runs: list[tuple[int, ...]], i: int) -> bool:
    return i + 1 == len(runs) or _keys(runs[i + 1])["c"] != _keys(runs[i])["c"]


def _strip_keys(name: str, tile: tuple[int, ...]) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(strip, sub-tile)`` keys of a resident input's tile: its non-K range, and its K range."""
    m0, m1, k0, k1, n0, n1 = tile[:6]
    return ((m0, m1) if name == "a" else (n0, n1)), (k0, k1)


def _place(b: _Builder, runs: list[tuple[int, ...]], room: dict[str, int], half: dict[str, int], resident: str,
           kt: int, names: tuple[str, ...] = ("a", "b", "c")) -> list[tuple[dict[str, int], list[tuple[str, int]]]]:
    """Per run: the buffer base of each operand's tile, and the ``(input, buffer address)`` loads
    it needs first.

    A tile goes to base ``side * half`` (``half`` 0 single buffered), the side flipping when the
    operand's tile changes. The ``resident`` input (``""``: none) keeps a whole strip: its K
    sub-tile ``j`` sits at ``j`` full sub-tiles past the strip's base and is loaded once per
    strip. ``room``: words each operand may use from its base; ``names``: the operands placed
    (A is not when it is on chip already).

    Raises:
        ModelError: a tile (or a resident strip) does not fit its room.
    """
    held: dict[str, tuple[int, ...] | None] = {"a": None, "b": None, "c": None}
    side = {"a": 1, "b": 1, "c": 1}  # the half used last (the first tile goes to half 0)
    in_strip: set[tuple[int, int]] = set()
    placed: list[tuple[dict[str, int], list[tuple[str, int]]]] = []
    for tile in runs:
        keys = _keys(tile)
        bases: dict[str, int] = {}
        loads: list[tuple[str, int]] = []
        for name in names:
            offset = 0
            if name == resident:
                strip, sub = _strip_keys(name, tile)
                if held[name] != strip:
                    side[name] ^= 1
                    held[name] = strip
                    in_strip.clear()
                full = (tile[0], tile[1], tile[2], tile[2] + kt, tile[4], tile[5])
                offset = tile[2] // kt * b.tile_words(name, full)
                if sub not in in_strip:
                    in_strip.add(sub)
                    loads.append((name, side[name] * half[name] + offset))
            elif held[name] != keys[name]:
                side[name] ^= 1
                held[name] = keys[name]
                if name != "c":
                    loads.append((name, side[name] * half[name]))
            words = offset + b.tile_words(name, tile)
            if words > room[name]:
                what = "strip" if name == resident else "tile"
                raise ModelError(f"a {what} of {name.upper()} needs {words} buffer words, more than the "
                                 f"{room[name]} it may use")
            bases[name] = side[name] * half[name] + offset
        placed.append((bases, loads))
    return placed


def _single(b: _Builder, runs: list[tuple[int, ...]], placed: list[tuple[dict[str, int], list[tuple[str, int]]]],
            requant: bool) -> None:
    for i, (tile, (bases, loads)) in enumerate(zip(runs, placed, strict=True)):
        for name, addr in loads:
            b.add(b.transfer(Opcode.LOAD, name, tile, addr, wait_run=True))
        b.add(b.run(tile, bases))
        if _last_of_output(runs, i):
            b.add(b.store(tile, bases["c"], requant, wait_run=True))


def _double(b: _Builder, runs: list[tuple[int, ...]], placed: list[tuple[dict[str, int], list[tuple[str, int]]]],
            requant: bool) -> None:
    bases = [p[0] for p in placed]
    loads = [[b.transfer(Opcode.LOAD, name, tile, addr) for name, addr in p[1]]
             for tile, p in zip(runs, placed, strict=True)]
    for cmd in loads[0]:
        b.add(cmd)
    ends = [i for i in range(len(runs)) if _last_of_output(runs, i)]  # last run of each output tile
    following = dict(zip(ends, [b - a for a, b in zip(ends, ends[1:], strict=False)] + [0], strict=True))
    pieces: list[Command] = []  # the previous output tile's store, one part per run of this one
    for i, tile in enumerate(runs):
        b.add(b.run(tile, bases[i]))
        if pieces:
            b.add(pieces.pop(0))
        if i + 1 < len(runs):
            for cmd in loads[i + 1]:
                b.add(cmd)
        if i in following:  # an output tile is complete: its store rides on the next tile's runs
            if following[i]:
                pieces = b.store_parts(tile, bases[i]["c"], requant, following[i])
            else:
                b.add(b.store(tile, bases[i]["c"], requant, wait_run=True))

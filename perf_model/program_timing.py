"""Total cycles of a command program: the sequencer's contract (``rtl_gen.soc.sequencer``), walked.

Cycle ``c`` lies between edges ``E_{c-1}`` and ``E_c``; the program is started at ``E0``. The
fetch is a DMA load of the program (``len`` words of ``32 / W`` beats, or ``ceil(len * 32 / W)``
words of one beat on a bus wider than a command: ``accel_spec.isa.fetch_beats``) issued at ``E1``, taking
``f`` cycles (:mod:`perf_model.dma_timing`); the first command is decoded in cycle ``f + 4``.
A command decoded in cycle ``c`` is issued at ``E_c`` if in cycle ``c`` its unit (the DMA for
LOAD/STORE/MOVE, the array for RUN, the vector unit for VECTOR) and the units its wait bits name
are idle, else it is decoded again the next cycle (a VECTOR is decoded with its parameter block,
the next slot, which takes no cycle of its own). A unit issued at ``E_x`` with ``n`` cycles of work (``dma_timing``'s
``load_cycles``/``store_cycles``, ``commands.move_cycles``, ``timing.run_cycles``,
``vector_timing.vector_run_cycles``) is busy in
cycles ``x+1 .. x+n``. The
next command is decoded two cycles after an issue. After the last command the program ends in
the first cycle ``T`` in which every unit is idle; the RTL's counters read ``total = T``,
``compute`` = the sum of the runs' ``n``, ``stall = T - compute``.

The DRAM side is the model of ``rtl_gen.soc.dram_model`` with its latency; bandwidth is one beat of
the AXI data width per cycle, or, with ``rate`` (the model's ``rate`` setting, :func:`dram_rate`
of the design), the paced beats of :class:`perf_model.dma_timing.Pace`: one credit shared by
every transfer of a queue-load, full when it starts (the host's register writes between two
queue-loads are more cycles than the credit takes to fill, ``W / rate + 1``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from fractions import Fraction

from accel_spec import isa
from accel_spec.config import ArrayConfig
from accel_spec.isa import COMMAND_BYTES, OUTSTANDING, Command, Opcode
from accel_spec.isa import DRAM_LATENCY as DEFAULT_DRAM_LATENCY  # the DRAM model latency unless one is named
from perf_model import dma_timing, timing
from perf_model._memory_parts import effective_dram_bytes_per_cycle
from perf_model.vector_timing import vector_run_cycles

__all__ = ["ProgramTiming", "TimedCommand", "timed_transfers", "program_cycles", "gemm_program_cycles",
           "axi_data_bytes", "word_beats", "transfer_word_beats", "transfer_bytes", "transfer_geometry_cycles",
           "program_dram_bytes", "PROGRAM_BLIND_FIELDS", "BUFFER_FIELDS",
           "program_fields", "dram_rate",
           "DEFAULT_DRAM_LATENCY", "FETCH_DECODE_CYCLES", "ISSUE_CYCLES", "OUTSTANDING"]

#: Cycles from the end of the fetch to the first decode.
FETCH_DECODE_CYCLES = 3
#: Cycles from one issue to the next decode.
ISSUE_CYCLES = 2


@dataclasses.dataclass(frozen=True)
class ProgramTiming:
    """What the RTL's counters read at the end of a program, and the parts they come from.

    Attributes:
        total, compute, stall: the ``CYCLES_TOTAL``/``COMPUTE``/``DMA_STALL`` counters.
        fetch: cycles of the program fetch.
        dma: cycles the DMA engines were busy (loads and stores).
        issue: the cycle each command was issued (edge index; a ``VECTOR``'s parameter block has none).
        vector: cycles the vector unit was busy (in ``stall``: the counters name the array's cycles only).
    """

    total: int
    compute: int
    stall: int
    fetch: int
    dma: int
    issue: tuple[int, ...]
    vector: int = 0


class TimedCommand:
    """A command of a program compiled for its figures only (``perf_model.compiler.conv_timed``): its
    opcode, wait bits and ``window`` flag as the compiler would encode them, the cycles its unit
    is busy (``cycles``, at an unpaced DRAM: :func:`dram_rate` ``None``) and the DRAM bytes it moves
    (``read``/``written``), without its fields but those a conv's figures read (``fields``: a
    transfer's ``buffer``, a RUN's ``m``, ``k``, ``n`` and ``accumulate``; read as a command's,
    ``cmd["m"]``), and a LOAD's or STORE's ``transfer``: ``(load, requant, dram_addr, dram_stride,
    rows, words, beats a word)``, what its cycles depend on (the address modulo a page: tensors move
    by whole pages), from which a walk at a paced DRAM (or another latency) times it
    (:func:`transfer_geometry_cycles`). :func:`program_cycles` walks it as the command it stands
    for; :func:`program_dram_bytes` counts its bytes. It is never encoded."""

    __slots__ = ("opcode", "wait_dma", "wait_run", "wait_vec", "cycles", "window", "read", "written", "fields",
                 "transfer")

    def __init__(self, opcode: int, cycles: int, wait_dma: int = 0, wait_run: int = 0, wait_vec: int = 0,
                 window: int = 0, read: int = 0, written: int = 0, fields: dict[str, int] | None = None,
                 transfer: tuple[bool, bool, int, int, int, int, int] | None = None) -> None:
        self.opcode, self.cycles, self.window = opcode, cycles, window
        self.wait_dma, self.wait_run, self.wait_vec = wait_dma, wait_run, wait_vec
        self.read, self.written, self.fields, self.transfer = read, written, fields, transfer

    def __getitem__(self, name: str) -> int:
        if name == "window":
            return self.window
        if self.fields is not None and name in self.fields:
            return self.fields[name]
        raise KeyError(f"a timed command has no field {name!r} (only its timing)")

    def waiting_for_vector(self) -> TimedCommand:
        """This command with ``wait_vec`` set."""
        return TimedCommand(self.opcode, self.cycles, wait_dma=self.wait_dma, wait_run=self.wait_run, wait_vec=1,
                            window=self.window, read=self.read, written=self.written, fields=self.fields,
                            transfer=self.transfer)

    def __repr__(self) -> str:
        return (f"TimedCommand(opcode={self.opcode}, cycles={self.cycles}, wait_dma={self.wait_dma}, "
                f"wait_run={self.wait_run}, wait_vec={self.wait_vec}, window={self.window})")


def timed_transfers(config: ArrayConfig, commands: Sequence[Command]) -> list[Command]:
    """``commands`` with each compiled ``LOAD`` and ``STORE`` as a :class:`TimedCommand`: its cycles at
    the default DRAM, its geometry (at any other), its buffer and its DRAM bytes (none for a LOAD of
    the output stage's parameters), what a walk and :func:`program_dram_bytes` read of it (a figures-
    only network's links: ``perf_model.compiler.conv_network``). Other commands are kept.

    Raises:
        ValueError: a transfer's ``lanes`` the RTL refuses (:func:`transfer_word_beats`).
    """
    W, beats = axi_data_bytes(config), word_beats(config)
    out: list[Command] = []
    for c in commands:
        if type(c) is TimedCommand or c.opcode not in (Opcode.LOAD, Opcode.STORE):
            out.append(c)
            continue
        transfer = _geometry(c, beats, W)
        load, _, _, _, rows, words, per_word = transfer
        moved = rows * words * per_word * W
        read = moved if load and c["buffer"] != isa.Buffer.QPARAM else 0
        timed = TimedCommand(c.opcode, transfer_geometry_cycles(*transfer, W, DEFAULT_DRAM_LATENCY, OUTSTANDING),
                             c.wait_dma, c.wait_run, c.wait_vec, 0, read, 0 if load else moved,
                             {"buffer": c["buffer"]}, transfer)
        out.append(timed)  # type: ignore[arg-type]  # (walked and counted as the command it stands for)
    return out


#: Largest denominator of a paced rate (bytes a cycle as ``num / den``, :func:`dram_rate`).
RATE_DENOMINATOR = 1000


#: Results of :func:`_transfer_cycles` by the transfer's geometry and the credit's state (a walk
#: repeats a few geometries many times: one band load a tile, one store a tile).
_TRANSFERS: dict[tuple[object, ...], tuple[int, tuple[int, int] | None]] = {}
_TRANSFERS_SIZE = 1 << 16
#: A transfer's geometry -> what its bursts depend on (the part of :data:`_TRANSFERS`' key it gives).
_BURSTS: dict[tuple[object, ...], tuple[object, ...]] = {}


def _transfer_cycles(cmd: Command, data_bytes: int, beats: dict[str, int], latency: int,
                     outstanding: int, pace: dma_timing.Pace | None = None, at: int = 0) -> int:
    if cmd.opcode == Opcode.MOVE:
        return isa.move_cycles(cmd["rows"], cmd["words"])
    return transfer_geometry_cycles(*_geometry(cmd, beats, data_bytes), data_bytes, latency, outstanding, pace, at)


def _geometry(cmd: Command, beats: dict[str, int], data_bytes: int) -> tuple[bool, bool, int, int, int, int, int]:
    """A compiled ``LOAD``'s or ``STORE``'s :func:`transfer_geometry_cycles` arguments: ``(load, requant,
    dram_addr, dram_stride, rows, words, beats a word)`` (its fields read as a dict once: a field read by
    name is a scan of them)."""
    f = dict(cmd.fields)
    load = cmd.opcode == Opcode.LOAD
    requant = f.get("requant", 0)
    return (load, bool(requant) and not load, f.get("dram_addr", 0), f.get("dram_stride", 0), f.get("rows", 0),
            f.get("words", 0), _word_beats(load, f.get("buffer", 0), requant, f.get("lanes", 0), beats, data_bytes))


def transfer_geometry_cycles(load: bool, requant: bool, addr: int, stride: int, rows: int, words: int, per_word: int,
                             data_bytes: int, latency: int, outstanding: int, pace: dma_timing.Pace | None = None,
                             at: int = 0) -> int:
    """Cycles of a ``LOAD`` (``load``) or ``STORE`` (``requant``: a requantising one) of ``rows`` rows of
    ``words`` words of ``per_word`` beats at DRAM ``addr`` and ``stride``, starting at cycle ``at``
    (``pace``: the DRAM's credit, advanced)."""
    shape = (load, requant, addr, stride, rows, words, per_word, data_bytes)
    bursts = _BURSTS.get(shape)
    if bursts is None:
        # the bursts depend on the addresses modulo a page (a page is whole beats), or not at all
        where: object = None
        if not dma_timing.same_bursts_any_address(addr, stride, rows, words * per_word * data_bytes):
            where = (addr % dma_timing.PAGE_BYTES, stride % dma_timing.PAGE_BYTES if rows > 1 else 0)
        if len(_BURSTS) >= _TRANSFERS_SIZE:
            _BURSTS.clear()
        bursts = _BURSTS[shape] = (load, requant, where, rows, words, per_word, data_bytes)
    key = (bursts, latency, outstanding, None if pace is None else (pace.num, pace.need, pace.state_at(at)))
    hit = _TRANSFERS.get(key)
    if hit is not None:
        if pace is not None and hit[1] is not None:
            pace.set_state(at, hit[1])
        return hit[0]
    lens = list(dma_timing.bursts(addr, stride, rows, words * per_word, data_bytes))
    if load:
        n = dma_timing.load_cycles(lens, latency, outstanding, pace, at)
    else:
        read_latency = isa.store_read_latency(requant)
        n = dma_timing.store_cycles(lens, rows * words, per_word, latency, outstanding, read_latency, pace, at)
    if len(_TRANSFERS) >= _TRANSFERS_SIZE:
        _TRANSFERS.clear()
    _TRANSFERS[key] = (n, None if pace is None else pace.state_at(at))
    return n


def transfer_word_beats(cmd: Command, beats: dict[str, int], data_bytes: int) -> int:
    """Beats one buffer word of the ``LOAD`` or ``STORE`` ``cmd`` takes in DRAM: its buffer's word
    (a requantising STORE of the ofmap: the requantised word), narrowed by its ``lanes``
    (``accel_spec.isa.transfer_beats``); ``beats`` is :func:`word_beats`.

    Raises:
        ValueError: ``lanes`` the RTL refuses (``ERROR_DRAM``): above the word's, or not whole beats.
    """
    return _word_beats(cmd.opcode == Opcode.LOAD, cmd["buffer"], cmd["requant"], cmd["lanes"], beats, data_bytes)


def _word_beats(load: bool, buffer: int, requant: int, lanes: int, beats: dict[str, int], data_bytes: int) -> int:
    """:func:`transfer_word_beats` of a LOAD (``load``) or STORE of these fields."""
    if not load and buffer == 2:
        kind = "requant" if requant else "ofmap"
    else:  # a LOAD, or a STORE of the ifmap (vector designs): its words as loaded
        kind = ("ifmap", "weight", "ofmap", "qparam")[buffer]
    if not lanes:
        return beats[kind]
    full = beats[f"{kind}_lanes"]
    got = isa.transfer_beats(beats[kind] * data_bytes, full, lanes, data_bytes)
    if got is None:
        raise ValueError(f"lanes must be at most {full} and whole {data_bytes}-byte beats, not {lanes} ({kind})")
    return got


def transfer_bytes(cmd: Command, beats: dict[str, int], data_bytes: int) -> int:
    """DRAM bytes a ``LOAD`` or ``STORE`` moves: its rows of words at :func:`transfer_word_beats`
    each (a narrowed transfer at its real size); 0 for any other command."""
    if cmd.opcode not in (Opcode.LOAD, Opcode.STORE):
        return 0
    _, _, _, _, rows, words, per_word = _geometry(cmd, beats, data_bytes)
    return rows * words * per_word * data_bytes


def program_dram_bytes(config: ArrayConfig, commands: Sequence[Command]) -> tuple[int, int]:
    """DRAM bytes ``(read, written)`` of a program's transfers, as the model counts an op's: every
    ``LOAD`` and ``STORE`` of data (bands, weights, tensors between ops, a vector op's chunks), the
    output stage's parameters and the program fetch excluded."""
    beats, W = word_beats(config), axi_data_bytes(config)
    read = written = 0
    for c in commands:
        if type(c) is TimedCommand:
            read += c.read
            written += c.written
        elif c.opcode == Opcode.LOAD and c["buffer"] != isa.Buffer.QPARAM:
            read += transfer_bytes(c, beats, W)
        elif c.opcode == Opcode.STORE:
            written += transfer_bytes(c, beats, W)
    return read, written


def axi_data_bytes(config: ArrayConfig) -> int:
    """The AXI data width of ``config``'s memory interface, bytes (``accel_spec.isa``)."""
    return isa.axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                                       config.dataflow.value == "is", bool(config.packed_kinds))


def word_beats(config: ArrayConfig) -> dict[str, int]:
    """AXI beats per buffer word in DRAM, by kind (``accel_spec.isa.dram_word_bytes``), and each
    kind's lanes as ``KIND_lanes`` (``accel_spec.isa.dram_word_lanes``)."""
    W = axi_data_bytes(config)
    IS = config.dataflow.value == "is"
    words = isa.dram_word_bytes(config.rows, config.cols, IS, config.input_bits, config.acc_bits,
                                         config.packed_kinds)
    lanes = isa.dram_word_lanes(config.rows, config.cols, IS)
    return {**{kind: size // W for kind, size in words.items()},
            **{f"{kind}_lanes": n for kind, n in lanes.items()}}


#: Design fields a program and its walk see only through :func:`dram_rate` (the node, the clock, the
#: memory part) or not at all (the power-density limit): designs differing in these alone, at one
#: rate, run one program in the same cycles (the model's caches key on the other fields and the rate).
PROGRAM_BLIND_FIELDS = ("tech_nm", "clock_mhz", "dram", "max_power_density_w_mm2")
#: The buffer sizes: a conv program sees them only through the tiling they let fit and the tiles they bound.
BUFFER_FIELDS = ("ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib")


def program_fields(config: ArrayConfig, leave_out: tuple[str, ...] = ()) -> tuple[object, ...]:
    """The values of ``config``'s fields a program sees: all but :data:`PROGRAM_BLIND_FIELDS` and
    ``leave_out`` (what the model's caches of programs and walks key on, with the pacing)."""
    skip = (*PROGRAM_BLIND_FIELDS, *leave_out)
    return tuple(getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in skip)


def dram_rate(config: ArrayConfig) -> Fraction | None:
    """The DRAM pacing of ``config``: its sustained bytes a cycle (``perf_model._memory_parts``) as a
    fraction of denominator at most :data:`RATE_DENOMINATOR`, or ``None`` when that is at least
    the bus width (one beat a cycle)."""
    return _rate(config.dram_bytes_per_cycle, config.dram, config.clock_mhz, axi_data_bytes(config))


@functools.lru_cache(maxsize=1 << 12)
def _rate(bytes_per_cycle: float, dram: str, clock_mhz: float, bus: int) -> Fraction | None:
    """:func:`dram_rate` of these fields (kept: a sweep asks for it per design and conv, and the
    vectorised part lookup costs more than the rest of a conv's score)."""
    rate = float(effective_dram_bytes_per_cycle(bytes_per_cycle, dram, clock_mhz))
    paced = Fraction(rate).limit_denominator(RATE_DENOMINATOR)
    return paced if paced < bus else None


def program_cycles(config: ArrayConfig, commands: Sequence[Command], *, queue_base: int = 0,
                   latency: int = DEFAULT_DRAM_LATENCY, outstanding: int = OUTSTANDING,
                   rate: Fraction | None = None) -> ProgramTiming:
    """Walk ``commands`` under the sequencer's rules (module docstring).

    Args:
        config: the design (array shape, dataflow, AXI width).
        commands: the program.
        queue_base: DRAM byte address of the program.
        latency: the DRAM model's latency (cycles).
        outstanding: bursts in flight per DMA engine (``rtl_gen``'s ``OUTSTANDING``).
        rate: the DRAM's paced bytes a cycle (module docstring; ``None``: a beat every cycle).
    """
    data_bytes = axi_data_bytes(config)
    pace = dma_timing.Pace(rate, data_bytes) if rate is not None else None
    beats = word_beats(config)
    fetch_beats = isa.fetch_beats(len(commands), data_bytes)
    fetch_lens = list(dma_timing.bursts(queue_base, 0, 1 if commands else 0, fetch_beats, data_bytes))
    fetch = dma_timing.load_cycles(fetch_lens, latency, outstanding, pace, 1)
    decode = 1 + fetch + FETCH_DECODE_CYCLES
    dma_free = run_free = vec_free = 0  # first cycle each unit is idle
    compute = dma = vector = 0
    issued = []
    df = timing.dataflow_code(config.dataflow.value)
    default_dram = pace is None and latency == DEFAULT_DRAM_LATENCY and outstanding == OUTSTANDING
    load_op, store_op, move_op, run_op, sync_op, vector_op = (Opcode.LOAD, Opcode.STORE, Opcode.MOVE, Opcode.RUN,
                                                              Opcode.SYNC, Opcode.VECTOR)
    for at, cmd in enumerate(commands):
        op = cmd.opcode
        if op == Opcode.VECTOR_PARAMS:  # a VECTOR's parameter block: read with it, never issued
            continue
        c = decode
        sync = op == sync_op
        is_dma = op == load_op or op == store_op or op == move_op
        if (is_dma or sync or cmd.wait_dma) and dma_free > c:
            c = dma_free
        if (op == run_op or sync or cmd.wait_run) and run_free > c:
            c = run_free
        if (op == vector_op or sync or cmd.wait_vec) and vec_free > c:
            c = vec_free
        if type(cmd) is TimedCommand:
            n = cmd.cycles  # (at the default DRAM; a MOVE's on any)
            if not default_dram and (op == load_op or op == store_op):
                if cmd.transfer is None:
                    raise ValueError("a timed transfer without its geometry is timed at an unpaced DRAM of the "
                                     "default latency and bursts in flight only; walk the compiled program")
                n = transfer_geometry_cycles(*cmd.transfer, data_bytes, latency, outstanding, pace, c)
            if is_dma:
                dma_free = c + n + 1
                dma += n
            else:
                run_free = c + n + 1
                compute += n
        elif is_dma:
            n = _transfer_cycles(cmd, data_bytes, beats, latency, outstanding, pace, c)
            dma_free = c + n + 1
            dma += n
        elif op == run_op:
            f = dict(cmd.fields)
            n = timing.run_cycles_of(df, config.rows, config.cols, f.get("m", 0), f.get("k", 0), f.get("n", 0),
                                     bool(config.shadow_stationary))
            run_free = c + n + 1
            compute += n
        elif op == vector_op:
            block = commands[at + 1] if at + 1 < len(commands) else None
            params = _params(block) if block is not None and block.opcode == Opcode.VECTOR_PARAMS else ()
            f = dict(cmd.fields)
            n = vector_run_cycles(f.get("vkind", 0), f.get("vrows", 0), f.get("vwords", 0), params, n=f.get("vn", 0),
                                  lanes=config.vector_lanes)
            vec_free = c + n + 1
            vector += n
        issued.append(c)
        decode = c + ISSUE_CYCLES
    end = max(decode - 1, dma_free, run_free, vec_free) if commands else 1 + fetch + 1
    return ProgramTiming(total=end, compute=compute, stall=end - compute, fetch=fetch, dma=dma, issue=tuple(issued),
                         vector=vector)


def _params(block: Command) -> tuple[int, ...]:
    """A ``VECTOR``'s parameter block's ``vp0`` .. ``vp7``."""
    f = dict(block.fields)
    return tuple(f.get(name, 0) for name in _PARAM_NAMES)


_PARAM_NAMES = tuple(f"vp{i}" for i in range(8))


def gemm_program_cycles(config: ArrayConfig, program: object, *, latency: int = DEFAULT_DRAM_LATENCY,
                        outstanding: int = OUTSTANDING, rate: Fraction | None = None) -> ProgramTiming:
    """:func:`program_cycles` summed over the queue-loads of a ``GemmProgram`` (its ``chunks``); the
    last few walks are kept by program (by identity, the program held so its id is not reused: a
    network's compiler walks the program it keeps, and its caller then asks for the same walk)."""
    key = (id(program), config, latency, outstanding, rate)
    for held, k, walked in _WALKED:
        if k == key and held is program:
            return walked
    walked = _walk(config, program, latency, outstanding, rate)
    if isinstance(program.commands, tuple):  # type: ignore[attr-defined]  # (a program whose commands cannot change)
        _WALKED.append((program, key, walked))
    if len(_WALKED) > 4:
        del _WALKED[0]
    return walked


#: The last walks of :func:`gemm_program_cycles`: ``(program, key, timing)``.
_WALKED: list[tuple[object, tuple[object, ...], ProgramTiming]] = []


def _walk(config: ArrayConfig, program: object, latency: int, outstanding: int, rate: Fraction | None
          ) -> ProgramTiming:
    parts = [program_cycles(config, program.commands[a:b], queue_base=program.queue_base  # type: ignore[attr-defined]
                            + a * COMMAND_BYTES, latency=latency, outstanding=outstanding, rate=rate)
             for a, b in program.chunks]  # type: ignore[attr-defined]
    return ProgramTiming(total=sum(p.total for p in parts), compute=sum(p.compute for p in parts),
                         stall=sum(p.stall for p in parts), fetch=sum(p.fetch for p in parts),
                         dma=sum(p.dma for p in parts), issue=tuple(i for p in parts for i in p.issue),
                         vector=sum(p.vector for p in parts))

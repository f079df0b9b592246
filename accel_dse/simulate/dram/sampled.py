"""The full-scale sampled check: which parts of an op's real program to simulate, and how.

An op's program (``perf_model.compile_gemm`` at full scale: the tiling, addresses and transfers
the model scored) is cut into **output tiles**: tile ``g``'s *segment* runs from the first LOAD
before its first RUN to the command before the next tile's segment, and its *window* from the
same command to its last STORE (double buffered, the STOREs of a tile ride on the next tile's
runs, so the window reaches into the next segment). A tile's **class** is the signature of its
window: every command with its wait bits and fields except the two addresses that only say
*where* (``dram_addr``, ``q_base``), the positions of queue-load boundaries inside it, whether
it is the first or the last tile, and the window registers it starts with (a conv's last WINDOW
command before it, whole). Tiles of one class run the same commands on the same buffer
halves with the same sizes; only their DRAM addresses and data differ.

The first tile of every class is simulated **in place**: its window (overlapping windows merged)
runs as a program of its own on the full-scale DRAM image, preceded by a *prologue*: the LOAD
commands of the real program that last wrote each buffer word before the window (so the buffers
hold, word for word, what the skipped part of the program would have left there; the ofmap needs
nothing: a window starts at a tile's first run, which does not accumulate) and the last WINDOW
command before it (a conv's window registers). Queue-load
boundaries of the real program inside a window stay boundaries. Every tile whose runs and STOREs
all lie inside a window is checked bit for bit; the window's RTL counters are checked against
:func:`perf_model.program_timing.program_cycles` of the same commands (the same contract as the
whole op). The other tiles are fast-forwarded: their cycles are the model's, the part of the whole
program's walk between the windows.

A class rule may be replaced (tests do, with a broken one): :func:`check_classes` refuses any rule
that puts two tiles with different signatures in one class, so a sampled check never skips a tile
that would run differently from the one simulated in its place.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from accel_spec.errors import SimulationError
from accel_spec.isa import COMMAND_BYTES, QUEUE_DEPTH, Command, Opcode, queue_entry_commands

__all__ = ["Tile", "Window", "SampledPlan", "output_tiles", "signature", "check_classes", "plan_sampled",
           "ClassRule"]

#: Fields that say only where a transfer goes, not what the hardware does.
_ADDRESS_FIELDS = ("dram_addr", "q_base")
_BUFFERS_LOADED = 4  # ifmap, weight, ofmap, qparam
#: Opcodes a program the sampled check cuts may hold (WINDOW: a conv's window registers, which hold
#: until the next WINDOW, so a window's prologue replays the last one before it).
_CUT_OPCODES = (Opcode.LOAD, Opcode.WINDOW, Opcode.RUN, Opcode.STORE)


@dataclasses.dataclass(frozen=True)
class Tile:
    """One output tile of a program: its box of C, its command range and its RUNs."""

    box: tuple[int, int, int, int]  # m0, m1, n0, n1
    start: int  # first command of its segment
    store_end: int  # one past its last STORE
    runs: int


@dataclasses.dataclass(frozen=True)
class Window:
    """A part of the program simulated in place.

    Attributes:
        first, end: the program's commands ``first .. end - 1``.
        prologue: indices of the LOADs replayed before them.
        tiles: output tiles checked (all their runs and stores inside).
        runs: RUN commands among ``first .. end - 1``.
        chunks: ``(start, end)`` of each queue-load in :attr:`commands` order.
        span_model: the whole program's walk: cycles from the issue of ``first`` to that of ``end``.
    """

    first: int
    end: int
    prologue: tuple[int, ...]
    tiles: tuple[int, ...]
    runs: int
    chunks: tuple[tuple[int, int], ...]
    span_model: int

    def commands(self, program: Any) -> list[Command]:
        """The window's program: prologue, then its commands."""
        cmds = program.commands
        return [cmds[i] for i in self.prologue] + list(cmds[self.first:self.end])


@dataclasses.dataclass(frozen=True)
class SampledPlan:
    """What a sampled check of one program simulates (see the module docstring)."""

    tiles: tuple[Tile, ...]
    windows: tuple[Window, ...]
    classes: int
    runs_total: int
    total_model: int

    @property
    def runs_simulated(self) -> int:
        return sum(w.runs for w in self.windows)

    @property
    def tiles_checked(self) -> int:
        return sum(len(w.tiles) for w in self.windows)

    @property
    def skipped_model(self) -> int:
        """The whole program's model cycles outside the windows."""
        return self.total_model - sum(w.span_model for w in self.windows)


#: A class rule: the key of each output tile (tiles with equal keys are one class).
ClassRule = Callable[[Any, Sequence[Tile], int], object]


def _c_position(program: Any, cmd: Command) -> tuple[int, int]:
    """``(m, n)`` of the first element a STORE/MOVE of C writes."""
    c = program.tensors["c"]
    offset = cmd["dram_addr"] - c.base
    row, elem = offset // c.pitch, int(offset % c.pitch // c.elem_size)
    return (elem, row) if c.transposed else (row, elem)


def output_tiles(program: Any) -> list[Tile]:
    """The output tiles of ``program`` in run order (module docstring).

    Raises:
        SimulationError: a program this cut does not fit (a MOVE: on-chip reuse; a STORE of no tile).
    """
    cmds = program.commands
    run_at = [i for i, c in enumerate(cmds) if c.opcode == Opcode.RUN]
    if len(run_at) != len(program.runs):
        raise SimulationError(f"program has {len(run_at)} RUN commands for {len(program.runs)} runs")
    if any(c.opcode not in _CUT_OPCODES for c in cmds):
        raise SimulationError("a sampled check needs a program of LOAD, WINDOW, RUN and STORE commands only "
                              "(no on-chip reuse: run the ops unchained)")
    boxes: list[tuple[int, int, int, int]] = []
    first_run: list[int] = []
    for r, run in enumerate(program.runs):
        box = (run[0], run[1], run[4], run[5])
        if not boxes or boxes[-1] != box:
            boxes.append(box)
            first_run.append(r)
    starts = []
    for r in first_run:
        c = run_at[r]
        while c > 0 and cmds[c - 1].opcode in (Opcode.LOAD, Opcode.WINDOW):
            c -= 1
        starts.append(c)
    starts[0] = 0
    by_corner = {(b[0], b[2]): g for g, b in enumerate(boxes)}
    m_starts = sorted({b[0] for b in boxes})
    n_starts = sorted({b[2] for b in boxes})
    store_end = [0] * len(boxes)
    for i, c in enumerate(cmds):
        if c.opcode != Opcode.STORE:
            continue
        m, n = _c_position(program, c)
        key = (m_starts[bisect.bisect_right(m_starts, m) - 1], n_starts[bisect.bisect_right(n_starts, n) - 1])
        g = by_corner.get(key)
        if g is None:
            raise SimulationError(f"STORE at command {i} writes C at ({m}, {n}), in no output tile")
        store_end[g] = max(store_end[g], i + 1)
    runs = [b - a for a, b in zip(first_run, [*first_run[1:], len(program.runs)], strict=True)]
    tiles = [Tile(boxes[g], starts[g], store_end[g], runs[g]) for g in range(len(boxes))]
    for g, t in enumerate(tiles):
        if t.store_end <= t.start:
            raise SimulationError(f"output tile {g} ({t.box}) is never stored")
    return tiles


def _boundaries(program: Any) -> list[int]:
    return [a for a, _ in program.chunks[1:]]


def signature(program: Any, tiles: Sequence[Tile], g: int) -> tuple[object, ...]:
    """The class signature of tile ``g`` (module docstring)."""
    t = tiles[g]
    cmds = tuple((c.opcode, c.wait_dma, c.wait_run, tuple(f for f in c.fields if f[0] not in _ADDRESS_FIELDS))
                 for c in program.commands[t.start:t.store_end])
    inside = tuple(b - t.start for b in _boundaries(program) if t.start < b < t.store_end)
    # the window registers the tile starts with (a conv's last WINDOW before it): its RUNs read them
    before = next((c for c in reversed(program.commands[:t.start]) if c.opcode == Opcode.WINDOW), None)
    window = None if before is None else before.fields
    return (cmds, inside, g == 0, g == len(tiles) - 1, window)


def check_classes(program: Any, tiles: Sequence[Tile], rule: ClassRule) -> dict[object, list[int]]:
    """Tiles grouped by ``rule``, each class's first tile first.

    Raises:
        SimulationError: the rule puts together two tiles whose signatures differ (skipping one
            would leave a different behaviour unsimulated).
    """
    classes: dict[object, list[int]] = {}
    for g in range(len(tiles)):
        classes.setdefault(rule(program, tiles, g), []).append(g)
    for members in classes.values():
        head = signature(program, tiles, members[0])
        for g in members[1:]:
            if signature(program, tiles, g) != head:
                raise SimulationError(
                    f"class rule refused: output tile {g} {tiles[g].box} runs different commands from tile "
                    f"{members[0]} {tiles[members[0]].box} of its class, so it cannot be fast-forwarded")
    return classes


def _words(cmd: Command) -> np.ndarray:
    rows, words = cmd["rows"], cmd["words"]
    return (cmd["buf_addr"] + np.arange(rows, dtype=np.int64)[:, None] * cmd["row_step"]
            + np.arange(words, dtype=np.int64)[None, :] * cmd["word_step"]).reshape(-1)


def _prologues(cmds: Sequence[Command], starts: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """Per window start, the LOADs before it that last wrote some buffer word and the last WINDOW
    before it (the window registers it leaves set), in program order."""
    owner: list[np.ndarray] = [np.full(0, -1, dtype=np.int64) for _ in range(_BUFFERS_LOADED)]
    out: dict[int, tuple[int, ...]] = {}
    wanted = sorted(set(starts))
    at = 0
    window = -1  # the last WINDOW command so far
    for i, c in enumerate(cmds):
        while at < len(wanted) and wanted[at] == i:
            live = np.unique(np.concatenate([*owner, np.array([window], dtype=np.int64)]))
            out[wanted[at]] = tuple(int(v) for v in live if v >= 0)
            at += 1
        if at == len(wanted):
            break
        if c.opcode == Opcode.WINDOW:
            window = i
        if c.opcode != Opcode.LOAD:
            continue
        idx = _words(c)
        buf = owner[c["buffer"]]
        if len(idx) and idx.max() >= len(buf):
            grown = np.full(int(idx.max()) + 1, -1, dtype=np.int64)
            grown[:len(buf)] = buf
            owner[c["buffer"]] = buf = grown
        buf[idx] = i
    for s in wanted[at:]:
        out[s] = tuple(sorted({int(v) for o in owner for v in o if v >= 0} | ({window} if window >= 0 else set())))
    return out


def _chunks(length: int, prologue: int, first: int, boundaries: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Queue-loads of a window program: split at the real program's boundaries (mapped into it) and
    wherever a queue-load would exceed the queue."""
    cuts = sorted({prologue + b - first for b in boundaries if 0 < prologue + b - first < length})
    out = []
    start = 0
    for end in [*cuts, length]:
        while end - start > QUEUE_DEPTH:
            out.append((start, start + QUEUE_DEPTH))
            start += QUEUE_DEPTH
        if end > start:
            out.append((start, end))
        start = end
    return tuple(out)


def default_rule(program: Any, tiles: Sequence[Tile], g: int) -> object:
    """The class of tile ``g``: its signature."""
    return signature(program, tiles, g)


def plan_sampled(program: Any, timing_walk: Callable[[Sequence[Command], int], Any], *,
                 rule: ClassRule = default_rule) -> SampledPlan:
    """The windows of a sampled check of ``program``.

    Args:
        program: a ``GemmProgram``.
        timing_walk: ``(commands, queue_base) -> ProgramTiming`` (``program_cycles`` of the design).
        rule: the class rule (checked by :func:`check_classes`).
    """
    tiles = output_tiles(program)
    classes = check_classes(program, tiles, rule)
    chosen = sorted(members[0] for members in classes.values())
    spans = sorted((tiles[g].start, max(tiles[g].store_end, tiles[g + 1].start if g + 1 < len(tiles)
                                        else len(program.commands))) for g in chosen)
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    # the whole program's walk, queue-load by queue-load: when each command was issued
    issue: list[int] = []  # a queue-load's first command counts from the queue-load's start (its fetch)
    total = 0
    for a, b in program.chunks:
        part = timing_walk(program.commands[a:b], program.queue_base + a * COMMAND_BYTES)
        issue += [total] + [total + i for i in part.issue[1:]]
        total += part.total
    issue.append(total)
    prologues = _prologues(program.commands, [a for a, _ in merged])
    boundaries = _boundaries(program)
    run_at = np.array([c.opcode == Opcode.RUN for c in program.commands])
    windows = []
    for a, b in merged:
        pro = prologues[a] if a > 0 else ()
        checked = tuple(g for g, t in enumerate(tiles) if t.start >= a and t.store_end <= b)
        windows.append(Window(a, b, pro, checked, int(run_at[a:b].sum()),
                              _chunks(len(pro) + b - a, len(pro), a, boundaries), issue[b] - issue[a]))
    return SampledPlan(tuple(tiles), tuple(windows), len(classes), len(program.runs), total)


def window_layout(plan: SampledPlan, program: Any, base: int, data_bytes: int) -> tuple[list[list[tuple[int, int]]],
                                                                                        bytes, int]:
    """Where the window programs go in DRAM from byte ``base`` on: per window ``[(byte address,
    commands)]`` of its queue-loads, the bytes to place at ``base``, and the end address."""
    from accel_spec.isa import encode

    step = queue_entry_commands(data_bytes)
    raw = bytearray()
    out = []
    for w in plan.windows:
        cmds = w.commands(program)
        loads = []
        for a, b in w.chunks:
            pad = -len(raw) // COMMAND_BYTES % step
            raw += bytes(pad * COMMAND_BYTES)
            loads.append((base + len(raw), b - a))
            raw += b"".join(encode(c) for c in cmds[a:b])
        out.append(loads)
    return out, bytes(raw), base + len(raw)

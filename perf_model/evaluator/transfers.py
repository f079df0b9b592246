"""The memory interface in closed form: cycles of one DMA transfer and of a program fetch (internal).

The sweep's vectorised form of :mod:`perf_model.dma_timing` and :mod:`perf_model.program_timing`
(the walk the RTL's counters equal). Per design-op element:

* the AXI data width ``W`` (``accel_spec.isa.axi_data_bytes``, one definition for one design and for
  arrays of them) and the beats of one buffer word in DRAM per operand;
* the DRAM the sweep assumes: latency :data:`LATENCY` (``program_timing.DEFAULT_DRAM_LATENCY``)
  and one beat every ``beat`` cycles, ``beat = W / min(W, bandwidth)`` where ``bandwidth`` is the
  design's sustained bytes per cycle (``perf_model._memory_parts``). ``beat = 1``: the design asks for
  at least the bus width and its memory part keeps up, the RTL's DRAM model delivers one beat per
  cycle, and these formulas are the walk. A slower memory (``beat > 1``) is scored by the same
  formulas with every beat stretched; the RTL's DRAM model then paces its beats on a credit
  (``perf_model.dma_timing.Pace``, ``program_timing.dram_rate``) which an idle memory saves, so
  the walk's beats after a pause come sooner and this form is above the paced walk, by at most
  ``(beat - 1) * b * (rows - q * (D - 1)) + beat`` per transfer and ``beat`` per queue-load
  (tests/perf_model/test_model_fast_walk.py; ``docs/memory_system.md``).

A transfer of ``rows`` DRAM rows of ``b`` beats (a row is one burst, split at 256 beats) with at
most ``D`` bursts in flight (:data:`OUTSTANDING`) takes, from the recurrences of
``dma_timing`` with every row starting inside one 4 KiB page::

    load   n = L + 2 + rows * b + q * max(0, L + 1 - (D - 1) * b)
    store  n = lat + L + 3 + rows * b + q * max(0, L + 2 - (D - 1) * b),     q = (rows - 1) // D

Bandwidth-bound (``(D - 1) * b`` covers a round trip) the beats stream back to back after one
latency; latency-bound (rows of one or two beats), every ``D`` bursts wait for the response
of the burst ``D`` earlier. ``lat`` is the store path's buffer read latency
(:data:`STORE_READ_LATENCY`: raw words, or through the output stage). Both formulas equal
``dma_timing.load_cycles`` / ``store_cycles`` for every row count, row length and latency
(tests/perf_model/test_model_fast_walk.py). Rows crossing a 4 KiB page are split into two
bursts by the RTL; this form does not see that (the bound is in ``docs/memory_system.md``).

A ``MOVE`` (on-chip reuse: the output tile goes to the ifmap instead of DRAM, ``perf_model.compiler.chain``)
takes the place of a STORE of the same words: ``n + 1 = rows * words + 7 + 1``
(``accel_spec.isa.move_cycles``: a word a cycle through the output stage, no DRAM).

A queue-load of ``c`` commands is fetched as one row of ``ceil(c * 32 / W)`` beats
(``accel_spec.isa.fetch_beats``: a bus wider than a command reads whole beats):
``L + 2 + ceil(c * 32 / W)`` cycles (bursts of at least 128 beats: always bandwidth-bound;
queue-loads before the last hold ``QUEUE_DEPTH`` commands, whole beats, so the program's fetch
beats are ``ceil(commands * 32 / W)``), then
:data:`~perf_model.program_timing.FETCH_DECODE_CYCLES` + 1 cycles to the first decode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel_spec.isa import (
    COMMAND_BYTES,
    QUEUE_DEPTH,
    axi_data_bytes,
    move_cycles,
    store_read_latency,
)
from perf_model.evaluator.problem import FREE_OPERAND
from perf_model.program_timing import DEFAULT_DRAM_LATENCY, FETCH_DECODE_CYCLES, OUTSTANDING

__all__ = ["Memory", "memory_arrays", "axi_data_bytes", "LATENCY", "STORE_READ_LATENCY"]

#: DRAM latency the sweep assumes (cycles): the simulator's DRAM model's.
LATENCY = DEFAULT_DRAM_LATENCY
#: Buffer read latency of the store path (cycles): raw accumulators, and through the output stage
#: (``accel_spec.isa.store_read_latency``, which the RTL's DMA and the walk read too).
STORE_READ_LATENCY = (store_read_latency(False), store_read_latency(True))
#: Cycles a program costs per queue-load besides fetching its commands: the fetch's start and
#: latency (``L + 2``) and the decode of the first command.
_CHUNK_CYCLES = LATENCY + 2 + FETCH_DECODE_CYCLES + 1
_LANE_BYTES_RAW = (4, 8)  # raw accumulator lanes in DRAM: acc_bits <= 32, else
#: ``n + 1`` of a MOVE less its words (``move_cycles(1, 1) - 1`` is the output stage's latency).
_MOVE_FIXED = float(move_cycles(1, 1) - 1 + 1)


@dataclass
class Memory:
    """Per-element parameters of the memory interface (float64 arrays of shape ``(N,)`` unless noted).

    Attributes:
        data_bytes: AXI data width ``W``.
        beat: DRAM cycles per beat (1 on the RTL's DRAM model).
        word_beats: beats per buffer word of the operand free in r, c, s (three ``(N,)`` arrays).
        read_latency: the store path's read latency (:data:`STORE_READ_LATENCY`).
        qparam_cycles: command cycles (``n + 1``) of the output stage's parameter load (0: none).
        move: bool per element, the output's STOREs are MOVEs into the ifmap (on-chip reuse), or
            ``False`` for none.
        out_beats: beats of one stored output word (the STORE's), to count a MOVE's words.
    """

    data_bytes: np.ndarray
    beat: np.ndarray
    word_beats: tuple[np.ndarray, np.ndarray, np.ndarray]
    read_latency: np.ndarray
    qparam_cycles: np.ndarray
    move: np.ndarray | bool = False
    out_beats: np.ndarray | None = None

    def load(self, rows: np.ndarray, row_beats: np.ndarray) -> np.ndarray:
        """Cycles of a LOAD command in the sequencer's chain, ``n + 1`` (module docstring)."""
        return self.chain(rows, self.groups(rows), *self.row_terms(row_beats, False), False)

    def store(self, rows: np.ndarray, row_beats: np.ndarray) -> np.ndarray:
        """Cycles of a STORE command in the sequencer's chain, ``n + 1`` (module docstring)."""
        return self.chain(rows, self.groups(rows), *self.row_terms(row_beats, True), True)

    @staticmethod
    def groups(rows: np.ndarray) -> np.ndarray:
        """``q``: the groups of :data:`OUTSTANDING` bursts after the first that wait for a slot."""
        return np.floor((rows - 1) / OUTSTANDING)

    def row_terms(self, row_beats: np.ndarray, store: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(cycles a row's beats stream, wait of a latency-bound group)`` for rows of ``row_beats``."""
        stream = row_beats * self.beat
        return stream, np.maximum((LATENCY + 1 + store) - (OUTSTANDING - 1) * stream, 0.0)

    def chain(self, rows: np.ndarray, groups: np.ndarray, stream: np.ndarray, wait: np.ndarray,
              store: bool) -> np.ndarray:
        """``n + 1`` from :meth:`groups` of ``rows`` and :meth:`row_terms` (the parts vary apart)."""
        out = rows * stream
        out += groups * wait
        if store:
            out += self.read_latency
        out += (LATENCY + 4) if store else LATENCY + 3.0
        if store and self.move is not False and self.out_beats is not None:  # MOVEs: a word a cycle
            # whole words: a narrow row (fewer beats than a word, ``run_classes.row_beats``) is one
            words = np.ceil(stream / (self.beat * self.out_beats) - 1e-9)
            out = np.where(self.move, rows * words + _MOVE_FIXED, out)
        return out

    def program(self, commands: np.ndarray) -> np.ndarray:
        """Cycles of fetching ``commands`` commands in queue-loads of ``QUEUE_DEPTH`` and decoding the first
        of each (the rest of the program is the commands' own chain)."""
        loads = np.ceil(commands / QUEUE_DEPTH)
        return loads * _CHUNK_CYCLES + np.ceil(commands * COMMAND_BYTES / self.data_bytes) * self.beat


def memory_arrays(df: np.ndarray, rows: np.ndarray, cols: np.ndarray, input_bits: np.ndarray,
                  acc_bits: np.ndarray, data_bytes: np.ndarray, bandwidth: np.ndarray,
                  requant: np.ndarray, n: np.ndarray,
                  dram_bits: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Memory:
    """:class:`Memory` of every element from its design columns.

    Args:
        df, rows, cols, input_bits, acc_bits: ``(N,)`` design columns.
        data_bytes: ``(N,)`` the AXI width (:func:`axi_data_bytes` of the design).
        bandwidth: ``(N,)`` sustained DRAM bytes per cycle (``effective_dram_bytes_per_cycle``).
        requant: ``(N,)`` bool, the op's output leaves through the output stage.
        n: ``(N,)`` the GEMM's ``n`` (output channels: the parameter row's length).
        dram_bits: ``(N,)`` bits in DRAM of an element of A, B and a requantised C (default
            ``input_bits``; 4 for packed int4).
    """
    W = np.asarray(data_bytes, dtype=np.float64)
    R = np.asarray(rows, dtype=np.float64)
    C = np.asarray(cols, dtype=np.float64)
    ib = np.asarray(input_bits, dtype=np.float64) / 8.0
    raw = np.where(np.asarray(acc_bits) <= 32, *_LANE_BYTES_RAW).astype(np.float64)
    a_b, b_b, q_b = (ib, ib, ib) if dram_bits is None else (np.asarray(b, dtype=np.float64) / 8.0 for b in dram_bits)
    out = np.where(requant, q_b, raw)
    # The operand free in r and in s have words along c (C lanes), the one free in c along r (R lanes);
    # the one free in the reduction dim is the output (r for WS/IS, s for OS).
    out_free = np.where(np.asarray(df) == 1, 2, 0)
    operand = FREE_OPERAND[np.asarray(df, dtype=np.int64)].T  # (3, N): A 0, B 1, C 2 free in r, c, s
    elem = [np.where(operand[f] == 0, a_b, np.where(operand[f] == 1, b_b, out)) for f in range(3)]
    beats = [elem[f] * (lanes / W) for f, lanes in enumerate((C, R, C))]
    word_beats = (beats[0], beats[1], beats[2])
    beat = W / np.minimum(W, np.asarray(bandwidth, dtype=np.float64))
    # The parameters: one row of 16-byte lanes, words of one lane (IS) or C lanes, whole beats per word.
    per_word = np.where(np.asarray(df) == 2, 1.0, C)
    q_words = np.where(np.asarray(df) == 2, n, np.ceil(n / C))
    q_beats = q_words * np.floor(per_word * 16.0 / W)
    qparam = np.where(requant, np.where(q_beats > 0, (LATENCY + 3) + q_beats * beat, 1.0), 0.0)
    latency = np.where(requant, STORE_READ_LATENCY[1], STORE_READ_LATENCY[0]).astype(np.float64)
    return Memory(data_bytes=W, beat=beat, word_beats=word_beats, read_latency=latency, qparam_cycles=qparam,
                  out_beats=np.where(out_free == 2, word_beats[2], word_beats[0]))

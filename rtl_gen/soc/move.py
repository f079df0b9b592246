"""The on-chip move engine: ofmap words through the output stage into the ifmap (``MOVE``).

A layer's requantised output stays on chip as the next layer's input: the engine walks the
ofmap words of a ``MOVE`` (:mod:`accel_spec.isa`) like the store engine does, one read a
cycle with no back-pressure (the ifmap write port always takes a word), and writes each
requantised word to its ifmap address when it leaves the output stage.

Timing (``accel_spec.isa.move_cycles``, the walk's): ``start`` sampled at edge ``E0``; the
``i``-th word (``i = 0 ..``) is read in cycle ``1 + i`` and written to the ifmap at the edge
ending cycle ``1 + i + latency``; ``busy`` is high from cycle 1 through the cycle of the last
write. An empty move (``rows`` or ``words`` 0) never raises ``busy``.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError

__all__ = ["MoveEngine", "MOVE_FIELDS"]

#: The ``MOVE`` command's fields the engine takes (its inputs besides ``start``), as named in
#: ``accel_spec.isa.FIELDS``.
MOVE_FIELDS = ("rows", "words", "q_by_row", "buf_addr", "row_step", "word_step", "dst_addr", "dst_row_step",
               "dst_word_step")


class MoveEngine(wiring.Component):
    """See the module docstring.

    Ports: ``start``, ``rows``, ``words``, ``buf_addr``/``row_step``/``word_step`` (the ofmap
    walk), ``dst_addr``/``dst_row_step``/``dst_word_step`` (the ifmap walk), ``q_by_row`` in;
    ``busy``, ``src_addr`` with ``reading`` (the ofmap read of this cycle), ``q_index`` (its
    row, or word-in-row, for the parameter select), ``dst_we``/``dst`` (the ifmap write of this
    cycle) out.

    Args:
        latency: cycles from an ofmap read to its requantised word (``store_read_latency(True)``).
        src_bits, dst_bits: widths of ofmap and ifmap word addresses.
        count_bits: width of ``rows`` and ``words``.
    """

    def __init__(self, *, latency: int, src_bits: int, dst_bits: int, count_bits: int = 16) -> None:
        if latency < 1:
            raise ConfigError(f"move latency must be >= 1, not {latency}")
        self.latency = latency
        super().__init__({
            "start": In(1), "rows": In(count_bits), "words": In(count_bits), "q_by_row": In(1),
            "buf_addr": In(src_bits), "row_step": In(src_bits), "word_step": In(src_bits),
            "dst_addr": In(dst_bits), "dst_row_step": In(dst_bits), "dst_word_step": In(dst_bits),
            "busy": Out(1), "reading": Out(1), "src_addr": Out(src_bits), "q_index": Out(count_bits),
            "dst_we": Out(1), "dst": Out(dst_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        r, j = Signal.like(self.rows), Signal.like(self.words)
        rows, words = Signal.like(self.rows), Signal.like(self.words)
        row_step, word_step = Signal.like(self.row_step), Signal.like(self.word_step)
        dst_row_step, dst_word_step = Signal.like(self.dst_row_step), Signal.like(self.dst_word_step)
        src_row, dst_row, dst = Signal.like(self.src_addr), Signal.like(self.dst), Signal.like(self.dst)
        q_by_row = Signal()
        reading = Signal()
        m.d.comb += [self.reading.eq(reading), self.q_index.eq(Mux(q_by_row, r, j))]
        # The destinations of the reads in flight, and their valid bits, one stage per cycle.
        pipe_valid = Signal(self.latency)
        pipe_dst = [Signal.like(self.dst, name=f"dst_{i}") for i in range(self.latency)]
        m.d.sync += [pipe_valid.eq(Cat(reading, pipe_valid[:-1])), pipe_dst[0].eq(dst)]
        m.d.sync += [pipe_dst[i].eq(pipe_dst[i - 1]) for i in range(1, self.latency)]
        m.d.comb += [self.dst_we.eq(pipe_valid[-1]), self.dst.eq(pipe_dst[-1])]
        m.d.comb += self.busy.eq(reading | pipe_valid.any())
        with m.If(self.start & ~self.busy):
            empty = (self.rows == 0) | (self.words == 0)
            m.d.sync += [
                reading.eq(~empty), r.eq(0), j.eq(0), rows.eq(self.rows), words.eq(self.words),
                row_step.eq(self.row_step), word_step.eq(self.word_step), q_by_row.eq(self.q_by_row),
                dst_row_step.eq(self.dst_row_step), dst_word_step.eq(self.dst_word_step),
                self.src_addr.eq(self.buf_addr), src_row.eq(self.buf_addr),
                dst.eq(self.dst_addr), dst_row.eq(self.dst_addr),
            ]
        with m.Elif(reading):
            with m.If(j == words - 1):
                m.d.sync += [j.eq(0), r.eq(r + 1), src_row.eq(src_row + row_step),
                             self.src_addr.eq(src_row + row_step), dst_row.eq(dst_row + dst_row_step),
                             dst.eq(dst_row + dst_row_step)]
                with m.If(r == rows - 1):
                    m.d.sync += reading.eq(0)
            with m.Else():
                m.d.sync += [j.eq(j + 1), self.src_addr.eq(self.src_addr + word_step),
                             dst.eq(dst + dst_word_step)]
        return m

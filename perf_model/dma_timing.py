"""The DMA timing contract: cycles of one transfer between DRAM and a buffer.

What ``rtl_gen.soc.dma`` does against the DRAM model of ``rtl_gen.soc.dram_model`` (latency ``L``:
an AR or last W beat in cycle ``t`` is answered in cycle ``t + L + 1`` at the earliest, one
beat per cycle, in order). Cycles are counted like a run's: ``start`` sampled at edge ``E0``,
``busy`` low after edge ``E_n``; the functions return ``n``. Cycle ``c`` is the one between
edges ``E_{c-1}`` and ``E_c``.

A transfer's bursts (:func:`bursts`): each row of ``words * beats`` beats is split at
:data:`MAX_BURST` beats and at :data:`PAGE_BYTES` boundaries. Burst ``i`` is issued in cycle
``a_i = max(a_{i-1} + 1, done_{i-D} + 1)`` (``a_0 = 2``; ``D`` bursts in flight at most, a
burst's slot frees the cycle after it completes).

* Load: burst ``i``'s beats arrive in cycles ``s_i .. e_i``, ``s_i = max(a_i + L + 1, e_{i-1} +
  1)``, ``e_i = s_i + len_i - 1``; a burst completes with its last beat (``done_i = e_i``);
  ``n = e_last``.
* Store: word ``q`` is read from the buffer in cycle ``r_q = max(r_{q-1} + 1, p_{q-F} + 1)``
  (``r_0 = 1``, ``F`` = :data:`STORE_FIFO_WORDS`, ``p_q`` the cycle its last beat is sent) and
  can be sent from cycle ``r_q + lat + 1`` (``lat`` = ``accel_spec.isa.store_read_latency``:
  1 raw, ``1 + OUTPUT_STAGE_LATENCY`` = 7 through the output stage). Beat
  ``b`` (of word ``q``, burst ``i``) is sent in cycle ``max(prev + 1, r_q + lat + 1, a_i + 1)``;
  burst ``i``'s response comes in cycle ``done_i = max(last beat + L + 1, done_{i-1} + 1)``;
  ``n = done_last + 1``.

Paced DRAM (:class:`Pace`, the DRAM model's ``rate``): a memory slower than the bus moves a
data beat only when a credit of ``W`` bytes is there. The credit, counted in ``1 / den`` bytes,
gains ``num`` each cycle (``num / den`` bytes a cycle, below ``W``), loses ``W * den`` for each
beat moved, and saturates at ``W * den + num - 1`` (the most a stream at the full rate holds, so
a stream keeps the exact rate and only an idle memory stops saving). Read and write beats share
it; a read beat moves in the cycle before it arrives (the model's output register is loaded), a
write beat in the cycle it is taken. The recurrences then wait for the credit: a load's beat
arrives at ``max(the cycle above, m + 1)``, ``m`` the first cycle from the one before with
credit; a store's beat is sent in the first cycle with credit from the one above. Both take
``at``, the absolute cycle of their ``E0``, to place the shared credit in time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

from accel_spec import isa

__all__ = ["MAX_BURST", "PAGE_BYTES", "STORE_FIFO_WORDS", "DMA_ISSUE_CYCLE", "bursts", "same_bursts_any_address",
           "load_cycles", "store_cycles", "Pace"]

#: Beats per AXI4 INCR burst at most.
MAX_BURST = 256
#: Bursts never cross a boundary of this many bytes.
PAGE_BYTES = 4096
#: Words the store path holds between the buffer read and the W channel (``accel_spec.isa``).
STORE_FIFO_WORDS = isa.STORE_FIFO_WORDS
#: Cycle of the first burst's issue after ``start`` (the row length is computed in between).
DMA_ISSUE_CYCLE = 2


class Pace:
    """The DRAM's shared beat credit (module docstring), full at cycle 0.

    Args:
        rate: bytes a cycle, ``num / den`` (below ``data_bytes``).
        data_bytes: the AXI data width ``W``.
    """

    def __init__(self, rate: Fraction, data_bytes: int) -> None:
        self.num, self.den = rate.numerator, rate.denominator
        self.need = data_bytes * self.den
        if not 0 < self.num < self.need:
            raise ValueError(f"a paced rate must be above 0 and below {data_bytes} bytes a cycle, not {rate}")
        self.cap = self.need + self.num - 1
        self.cycle, self.credit = 0, self.cap  # credit at the start of ``cycle``, no beat since

    def state_at(self, at: int) -> tuple[int, int]:
        """The credit as a transfer starting at absolute cycle ``at`` sees it: ``(cycle - at, credit)``,
        a credit that stood idle up to ``at`` carried forward to it (``(0, credit at at)``). Two
        transfers of the same bursts from equal states take the same cycles and leave equal states
        (every beat moves at ``at`` or later), which lets a walk reuse a transfer's result."""
        if self.cycle <= at:
            return 0, min(self.credit + (at - self.cycle) * self.num, self.cap)
        return self.cycle - at, self.credit

    def set_state(self, at: int, state: tuple[int, int]) -> None:
        """Put the credit in ``state`` (:meth:`state_at`) relative to absolute cycle ``at``."""
        self.cycle, self.credit = at + state[0], state[1]

    def move(self, earliest: int) -> int:
        """The first cycle from ``earliest`` (absolute) in which a beat can move; moves it there."""
        wait = -(-(self.need - self.credit) // self.num)  # cycles from ``self.cycle`` to enough credit
        t = max(earliest, self.cycle + max(wait, 0))
        credit = min(self.credit + (t - self.cycle) * self.num, self.cap)
        self.cycle, self.credit = t + 1, credit + self.num - self.need
        return t


def bursts(addr: int, stride: int, rows: int, row_beats: int, data_bytes: int) -> Iterator[int]:
    """Lengths (beats) of the bursts of a transfer, in issue order."""
    page_beats = PAGE_BYTES // data_bytes
    for r in range(rows):
        cur = (addr + r * stride) // data_bytes
        left = row_beats
        while left:
            n = min(left, MAX_BURST, page_beats - cur % page_beats)
            yield n
            cur += n
            left -= n


def same_bursts_any_address(addr: int, stride: int, rows: int, row_bytes: int) -> bool:
    """Whether no row of a transfer crosses a :data:`PAGE_BYTES` boundary: then its bursts
    (:func:`bursts`) are each row's split at :data:`MAX_BURST` beats, the same at any address."""
    if rows == 0 or row_bytes == 0:
        return True
    if row_bytes > PAGE_BYTES:
        return False
    g = math.gcd(stride % PAGE_BYTES, PAGE_BYTES)
    if rows >= PAGE_BYTES // g:  # every offset of the row starts' progression is reached
        last = addr % g + PAGE_BYTES - g
    else:
        last = max((addr + r * stride) % PAGE_BYTES for r in range(rows))
    return last + row_bytes <= PAGE_BYTES


def load_cycles(lens: list[int], latency: int, outstanding: int, pace: Pace | None = None, at: int = 0) -> int:
    """``n`` of a load whose bursts have lengths ``lens`` (module docstring; ``pace``: a paced DRAM,
    ``at`` the absolute cycle of ``E0``)."""
    if not lens:
        return 0  # nothing to move: the engine never becomes busy
    issue: list[int] = []
    done: list[int] = []
    last = 0
    for i, n in enumerate(lens):
        a = DMA_ISSUE_CYCLE if i == 0 else issue[-1] + 1
        if i >= outstanding:
            a = max(a, done[i - outstanding] + 1)
        s = max(a + latency + 1, last + 1)
        if pace is None:
            last = s + n - 1
        else:
            for _ in range(n):
                last = pace.move(at + s - 1) - at + 1
                s = last + 1
        issue.append(a)
        done.append(last)
    return last


def store_cycles(lens: list[int], words: int, beats: int, latency: int, outstanding: int, read_latency: int,
                 pace: Pace | None = None, at: int = 0) -> int:
    """``n`` of a store of ``words`` words of ``beats`` beats in bursts ``lens`` (module docstring;
    ``pace``: a paced DRAM, ``at`` the absolute cycle of ``E0``)."""
    if not lens:
        return 0  # nothing to move: the engine never becomes busy
    issue: list[int] = []
    done: list[int] = []
    read: list[int] = []
    sent_word: list[int] = []  # cycle the last beat of each word is sent
    prev = 0
    burst, in_burst = 0, 0

    def issue_cycle(i: int) -> int:
        a = DMA_ISSUE_CYCLE if i == 0 else issue[i - 1] + 1
        if i >= outstanding:
            a = max(a, done[i - outstanding] + 1)
        return a

    # Bursts are issued as early as their slots allow; a slot frees on a response, which
    # depends on beats sent, so issue times are computed lazily as beats reach each burst.
    for q in range(words):
        r = 1 if q == 0 else read[-1] + 1
        if q >= STORE_FIFO_WORDS:
            r = max(r, sent_word[q - STORE_FIFO_WORDS] + 1)
        read.append(r)
        for _ in range(beats):
            while len(issue) <= burst:
                issue.append(issue_cycle(len(issue)))
            t = max(prev + 1, r + read_latency + 1, issue[burst] + 1)
            if pace is not None:
                t = pace.move(at + t) - at
            prev = t
            in_burst += 1
            if in_burst == lens[burst]:
                done.append(max(t + latency + 1, done[-1] + 1 if done else 0))
                burst += 1
                in_burst = 0
        sent_word.append(prev)
    return done[-1] + 1

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
from collections import deque
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

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

    def move_run(self, earliest: int, beats: int) -> int:
        """:meth:`move` of ``beats`` beats, the first from ``earliest``, each next one from the cycle
        after the one before (a burst's beats): the last beat's cycle.

        After the first beat, which leaves the state ``(c_0, credit_0)``, beat ``k`` moves in the first
        cycle from ``t_{k-1} + 1`` with ``credit_0 + (t - c_0) * num >= k * need``: no cycle between
        two beats is idle, so the credit never reaches its cap. The credit after a beat is below
        ``2 * num`` (at most the cap, plus ``num - need``), so the first cycle with the credit is
        never before ``t_{k-1} + 1``: the last beat moves in ``c_0 + ceil((m * need - credit_0) / num)``
        for ``m`` beats after the first, the run one step."""
        t = self.move(earliest)
        m = beats - 1
        if m <= 0:
            return t
        c0, credit0 = self.cycle, self.credit
        last = c0 - ((credit0 - m * self.need) // self.num)
        self.cycle, self.credit = last + 1, credit0 + (last + 1 - c0) * self.num - m * self.need
        return last


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


#: A paced transfer of more bursts (a load) or words (a store) than this is watched for a repeating
#: state, to skip the periods that repeat (:func:`_periods`).
SKIP_MIN = 64
#: States remembered while watching (the first repeat is found within this many bursts or words).
_SKIP_STATES = 4096


def _periods(lens: list[int], first: int, again: int, left: int) -> int:
    """How many whole periods of ``again - first`` bursts, from burst ``again`` on, repeat the bursts
    from ``first`` (the same lengths), at most ``left``."""
    period = again - first
    if period <= 0 or left <= 0:
        return 0
    ahead = len(lens) - again
    a = np.asarray(lens[first:first + ahead], dtype=np.int64)
    b = np.asarray(lens[again:], dtype=np.int64)
    differ = np.flatnonzero(a != b)
    same = int(differ[0]) if len(differ) else ahead
    return min(same // period, left)


def _issue_cycle(i: int, issue_last: int, done: deque[int], outstanding: int) -> int:
    """Cycle burst ``i`` is issued (module docstring): the cycle after burst ``i - 1``'s issue
    (``issue_last``), and not before a slot frees, the cycle after burst ``i - outstanding``'s
    response (``done[0]``: ``done`` holds the last ``outstanding`` responses)."""
    a = DMA_ISSUE_CYCLE if i == 0 else issue_last + 1
    return max(a, done[0] + 1) if i >= outstanding else a


def load_cycles(lens: list[int], latency: int, outstanding: int, pace: Pace | None = None, at: int = 0,
                *, skip: bool = True) -> int:
    """``n`` of a load whose bursts have lengths ``lens`` (module docstring; ``pace``: a paced DRAM,
    ``at`` the absolute cycle of ``E0``).

    A load of many bursts is watched at each burst's start for a state seen before (the last
    issue, the last ``outstanding`` responses and, paced, the credit, relative to the last beat): from
    there, while the bursts' lengths repeat too, every period repeats shifted in time, so whole
    periods are skipped at once (``skip=False``: every burst stepped, the same result; a paced
    burst's beats in one step, :meth:`Pace.move_run`).
    """
    if not lens:
        return 0  # nothing to move: the engine never becomes busy
    issue_last = 0
    done: deque[int] = deque(maxlen=outstanding)  # the last ``outstanding`` bursts' responses
    last = 0
    seen: dict[tuple[object, ...], tuple[int, int]] | None = {} if skip and len(lens) > SKIP_MIN else None
    i, count = 0, len(lens)
    while i < count:
        if seen is not None and i > 0:
            key = (issue_last - last, tuple(d - last for d in done), None if pace is None else pace.state_at(at + last))
            before = seen.get(key)
            if before is None:
                seen[key] = (i, last)
                if len(seen) > _SKIP_STATES:
                    seen = None
            else:
                k = _periods(lens, before[0], i, count)
                if k:
                    shift = k * (last - before[1])
                    state = None if pace is None else pace.state_at(at + last)
                    i += k * (i - before[0])
                    last += shift
                    issue_last += shift
                    done = deque((d + shift for d in done), maxlen=outstanding)
                    if pace is not None and state is not None:
                        pace.set_state(at + last, state)
                seen = None
                continue
        n = lens[i]
        a = _issue_cycle(i, issue_last, done, outstanding)
        s = max(a + latency + 1, last + 1)
        if pace is None:
            last = s + n - 1
        else:
            last = pace.move_run(at + s - 1, n) - at + 1
        issue_last = a
        done.append(last)
        i += 1
    return last


def store_cycles(lens: list[int], words: int, beats: int, latency: int, outstanding: int, read_latency: int,
                 pace: Pace | None = None, at: int = 0, *, skip: bool = True) -> int:
    """``n`` of a store of ``words`` words of ``beats`` beats in bursts ``lens`` (module docstring;
    ``pace``: a paced DRAM, ``at`` the absolute cycle of ``E0``).

    A store of many words (paced or not) is watched at each word's start that is also a burst's (the issues,
    the last ``outstanding`` responses, the last read, the last :data:`STORE_FIFO_WORDS` words' sends
    and the credit, relative to the last beat sent) for a state seen before, and the periods that
    repeat are skipped as :func:`load_cycles` does (``skip=False``: every word stepped). A word's beats
    within one burst move in one step: after the first, each waits only for the one before (and, paced,
    the credit: :meth:`Pace.move_run`).
    """
    if not lens:
        return 0  # nothing to move: the engine never becomes busy
    issued, issue_last = 0, 0  # bursts issued so far, the last one's issue cycle
    done: deque[int] = deque(maxlen=outstanding)  # the last ``outstanding`` responses
    sent: deque[int] = deque(maxlen=STORE_FIFO_WORDS)  # cycle the last beat of each of the last words is sent
    read_last = 0
    prev = 0
    burst, in_burst = 0, 0
    seen: dict[tuple[object, ...], tuple[int, int, int]] | None = (
        {} if skip and words > SKIP_MIN else None)
    q = 0
    # Bursts are issued as early as their slots allow; a slot frees on a response, which
    # depends on beats sent, so issue times are computed lazily as beats reach each burst.
    while q < words:
        if seen is not None and q > 0 and in_burst == 0:
            key = (issued - burst, issue_last - prev, tuple(d - prev for d in done), read_last - prev,
                   tuple(x - prev for x in sent), None if pace is None else pace.state_at(at + prev))
            before = seen.get(key)
            if before is None:
                seen[key] = (q, burst, prev)
                if len(seen) > _SKIP_STATES:
                    seen = None
            else:
                dq, db = q - before[0], burst - before[1]
                k = _periods(lens, before[1], burst, (words - q) // dq) if db > 0 else 0
                if k:
                    shift = k * (prev - before[2])
                    state = None if pace is None else pace.state_at(at + prev)
                    q, burst, issued = q + k * dq, burst + k * db, issued + k * db
                    prev, issue_last, read_last = prev + shift, issue_last + shift, read_last + shift
                    done = deque((d + shift for d in done), maxlen=outstanding)
                    sent = deque((x + shift for x in sent), maxlen=STORE_FIFO_WORDS)
                    if pace is not None and state is not None:
                        pace.set_state(at + prev, state)
                seen = None
                continue
        r = 1 if q == 0 else read_last + 1
        if q >= STORE_FIFO_WORDS:
            r = max(r, sent[0] + 1)
        read_last = r
        left = beats
        while left:  # the word's beats, a piece in each burst it lies in
            if issued <= burst:  # this burst's issue, once its slot is free
                issue_last, issued = _issue_cycle(issued, issue_last, done, outstanding), issued + 1
            piece = min(left, lens[burst] - in_burst)
            # the piece's first beat waits for the read, the issue and the beat before; each next one
            # only for the beat before (and the credit): one step (``Pace.move_run``)
            t = max(prev + 1, r + read_latency + 1, issue_last + 1)
            prev = t + piece - 1 if pace is None else pace.move_run(at + t, piece) - at
            in_burst += piece
            left -= piece
            if in_burst == lens[burst]:
                done.append(max(prev + latency + 1, done[-1] + 1 if done else 0))
                burst += 1
                in_burst = 0
        sent.append(prev)
        q += 1
    return done[-1] + 1

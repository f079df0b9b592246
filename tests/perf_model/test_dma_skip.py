"""A long transfer's repeating periods skipped (``dma_timing.load_cycles``/``store_cycles``, ``skip``)
take exactly the cycles of every beat stepped, and leave the paced DRAM's credit in the same state."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from perf_model import dma_timing


def _case(rng: random.Random) -> dict:
    W = rng.choice([4, 8, 16, 32, 64])
    den = rng.choice([1, 2, 3, 7, 10, 64, 999])
    num = rng.randint(1, W * den - 1)
    rows, beats, words_row = rng.choice([1, 2, 5, 40, 300]), rng.choice([1, 2, 3, 8]), rng.choice([1, 3, 16, 200])
    stride = rng.choice([0, W * beats * words_row, 4096, max(W, rng.randrange(1, 9000) // W * W)])
    lens = list(dma_timing.bursts(rng.randrange(0, 8192) // W * W, stride, rows, words_row * beats, W))
    return dict(W=W, rate=Fraction(num, den) if rng.random() < 0.7 else None, lens=lens, beats=beats,
                words=rows * words_row, latency=rng.choice([1, 5, 20, 40]), outstanding=rng.choice([1, 2, 8]),
                read_latency=rng.choice([1, 7]), at=rng.randrange(0, 1000), before=rng.randrange(0, 100))


def _pace(case: dict) -> dma_timing.Pace | None:
    if case["rate"] is None:
        return None
    pace = dma_timing.Pace(case["rate"], case["W"])
    for k in range(case["before"]):  # earlier traffic: a credit not full
        pace.move(2 * k)
    return pace


@pytest.mark.parametrize("kind", ["load", "store"])
def test_skipped_periods_equal_every_beat_stepped(kind):
    rng = random.Random(7 if kind == "load" else 8)
    skipped = 0
    for _ in range(150):
        case = _case(rng)
        fast, slow = _pace(case), _pace(case)
        if kind == "load":
            got = dma_timing.load_cycles(case["lens"], case["latency"], case["outstanding"], fast, case["at"])
            want = dma_timing.load_cycles(case["lens"], case["latency"], case["outstanding"], slow, case["at"],
                                          skip=False)
        else:
            args = (case["lens"], case["words"], case["beats"], case["latency"], case["outstanding"],
                    case["read_latency"])
            got = dma_timing.store_cycles(*args, fast, case["at"])
            want = dma_timing.store_cycles(*args, slow, case["at"], skip=False)
        assert got == want, case
        if fast is not None:
            assert fast.state_at(case["at"] + got + 3) == slow.state_at(case["at"] + got + 3), case
        skipped += len(case["lens"]) > dma_timing.SKIP_MIN
    assert skipped > 25  # long transfers, where periods are skipped, are among the cases


def test_a_long_store_is_counted_without_stepping_every_beat(monkeypatch):
    """The skip is taken: a 20,000-word store steps far fewer beats than it moves."""
    lens = list(dma_timing.bursts(0, 4096, 5000, 4 * 16, 16))  # rows of 4 words of 16 beats, a page apart
    steps = []
    real = dma_timing.Pace.move

    def counted(self, earliest):
        steps.append(earliest)
        return real(self, earliest)

    monkeypatch.setattr(dma_timing.Pace, "move", counted)
    fast = dma_timing.store_cycles(lens, 20000, 16, 20, 8, 1, dma_timing.Pace(Fraction(5, 2), 16), 0)
    stepped = len(steps)
    steps.clear()
    slow = dma_timing.store_cycles(lens, 20000, 16, 20, 8, 1, dma_timing.Pace(Fraction(5, 2), 16), 0, skip=False)
    assert fast == slow and len(steps) == 20000  # a step a word: its 16 beats lie in one burst
    assert stepped < len(steps) // 10


def test_an_unpaced_load_skips_its_repeating_periods_exactly(monkeypatch):
    """Unpaced too, a long load's repeating bursts are skipped (a band of thousands of DRAM rows, each
    crossing a page or longer than a burst), with the cycles of every burst stepped."""
    rng = random.Random(11)
    for _ in range(40):
        W = rng.choice([8, 16, 32, 64])
        lens = list(dma_timing.bursts(rng.randrange(0, 4096) // W * W, rng.choice([W * 40, 4096, 3000 // W * W]),
                                      rng.randint(70, 3000), rng.choice([1, 5, 40, 300]), W))
        args = (lens, rng.choice([5, 20, 40]), rng.choice([1, 2, 8]))
        assert dma_timing.load_cycles(*args) == dma_timing.load_cycles(*args, skip=False)
    lens = list(dma_timing.bursts(0, 4096, 5000, 70, 64))  # rows of 70 beats, a page apart: bursts of 64 and 6
    issued = []
    real = dma_timing._issue_cycle

    def counted(*a):
        issued.append(a)
        return real(*a)

    monkeypatch.setattr(dma_timing, "_issue_cycle", counted)
    fast = dma_timing.load_cycles(lens, 20, 8)
    stepped = len(issued)
    issued.clear()
    assert fast == dma_timing.load_cycles(lens, 20, 8, skip=False) and len(issued) == len(lens) == 10000
    assert stepped < len(lens) // 10


def test_a_bursts_beats_moved_at_once_are_each_beat_moved():
    """``Pace.move_run`` (a load's burst of beats in one step) against its beats moved one by one
    (``Pace.move``, each from the cycle after the one before), from random credits, rates and
    waits: the last beat's cycle and the credit left (cycle and amount) equal."""
    rng = random.Random(11)
    waited = 0
    for _ in range(3000):
        W = rng.choice([4, 8, 16, 32, 64])
        den = rng.choice([1, 2, 3, 7, 10, 64, 999])
        rate = Fraction(rng.randint(1, W * den - 1), den)
        one, run = dma_timing.Pace(rate, W), dma_timing.Pace(rate, W)
        t = 0
        for _ in range(rng.randrange(0, 30)):  # earlier traffic, with idle gaps
            t = one.move(t + rng.choice([0, 0, 1, 5, 40]))
            run.move(t)
        beats = rng.choice([1, 2, 3, 16, 255, 256])
        earliest = t + rng.choice([0, 1, 3, 100])
        last = step = one.move(earliest)
        for _ in range(beats - 1):
            step = one.move(step + 1)
            waited += step > last + 1
            last = step
        assert run.move_run(earliest, beats) == last
        assert (run.cycle, run.credit) == (one.cycle, one.credit)
    assert waited  # beats that waited for credit were among them


def _store_beat_by_beat(lens: list[int], words: int, beats: int, latency: int, outstanding: int,
                        read_latency: int, pace: dma_timing.Pace | None, at: int) -> int:
    """The store's recurrences of ``dma_timing``'s docstring, one beat at a time, written out here."""
    issue: list[int] = []  # burst i's issue cycle a_i
    done: list[int] = []  # burst i's response cycle
    sent: list[int] = []  # cycle word q's last beat is sent p_q
    read = prev = 0
    burst = in_burst = 0
    for q in range(words):
        read = 1 if q == 0 else read + 1
        if q >= dma_timing.STORE_FIFO_WORDS:
            read = max(read, sent[q - dma_timing.STORE_FIFO_WORDS] + 1)
        for _ in range(beats):
            if len(issue) == burst:  # issued once the beats reach it, when a slot is free
                a = dma_timing.DMA_ISSUE_CYCLE if burst == 0 else issue[-1] + 1
                if burst >= outstanding:
                    a = max(a, done[burst - outstanding] + 1)
                issue.append(a)
            t = max(prev + 1, read + read_latency + 1, issue[burst] + 1)
            if pace is not None:
                t = pace.move(at + t) - at
            prev = t
            in_burst += 1
            if in_burst == lens[burst]:
                done.append(max(t + latency + 1, done[-1] + 1 if done else 0))
                burst, in_burst = burst + 1, 0
        sent.append(prev)
    return done[-1] + 1


def test_a_stores_beats_moved_a_burst_piece_at_once_are_each_beat_moved():
    """``store_cycles`` (a word's beats in one burst moved in one step, skip on and off) against the
    store's recurrences stepped beat by beat, paced and not, from random credits, bursts crossing
    words (beats a word above a burst's length) and words crossing bursts included: the cycles and
    the credit left equal."""
    rng = random.Random(12)
    crossed = 0
    for _ in range(300):
        case = _case(rng)
        if rng.random() < 0.3:  # bursts shorter than a word: a word's beats in two or more bursts
            case["lens"] = [n for n in case["lens"] for n in ([n // 2, n - n // 2] if n > 1 else [n])]
            crossed += 1
        args = (case["lens"], case["words"], case["beats"], case["latency"], case["outstanding"],
                case["read_latency"])
        ref, fast, slow = _pace(case), _pace(case), _pace(case)
        want = _store_beat_by_beat(*args, ref, case["at"])
        assert dma_timing.store_cycles(*args, fast, case["at"]) == want, case
        assert dma_timing.store_cycles(*args, slow, case["at"], skip=False) == want, case
        if ref is not None:
            end = case["at"] + want + 3
            assert fast.state_at(end) == slow.state_at(end) == ref.state_at(end), case
    assert crossed > 50

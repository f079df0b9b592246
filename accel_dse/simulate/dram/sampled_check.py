"""The driver's side of a sampled check: one op's windows in DRAM, the testbench entries, the check.

:mod:`accel_dse.simulate.dram.sampled` decides what to simulate; this module lays the window programs
out after the op's full-scale DRAM image (each queue-load on a bus-beat boundary), times each
window with the model's walk of the same commands at the same addresses, hands the testbench one
entry per window (the image is written once, before the first; C is read once, after the last:
windows never store into a tile another window checks, see ``_sampled``) and checks the tiles
the windows produced.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import program_image
from accel_dse.simulate.dram.sampled import ClassRule, SampledPlan, default_rule, plan_sampled, window_layout
from accel_spec.config import ArrayConfig
from accel_spec.errors import SimulationError

__all__ = ["SampledJob", "sampled_job", "SAMPLED_NOTE"]

SAMPLED_NOTE = ("sampled full-scale check (not exhaustive): each op's real program at full scale; the first "
                "output tile of every class simulated in place (prologue: the program's own last LOADs into "
                "each buffer word), the other tiles fast-forwarded on the model's cycles; see each op's "
                "'sampled' entry")

#: Alignment of the window programs after the op's image, bytes.
_PAGE = 4096


@dataclasses.dataclass(frozen=True)
class SampledJob:
    """One op's sampled check (instance 0 of ``batch`` identical programs)."""

    plan: SampledPlan
    loads: tuple[tuple[tuple[int, int], ...], ...]  # per window: (byte address, commands) per queue-load
    window_base: int
    window_bytes: bytes
    image_end: int
    window_total: tuple[int, ...]
    window_compute: tuple[int, ...]
    batch: int
    poke_ranges: tuple[tuple[int, int], ...] = ()  # DRAM bytes the windows read (programs, loaded tiles)
    peek_ranges: tuple[tuple[int, int], ...] = ()  # DRAM bytes of C the checked tiles occupy

    @property
    def total_model(self) -> int:
        """The model's total cycles of the windows as simulated (what CYCLES_TOTAL must read)."""
        return sum(self.window_total)

    @property
    def compute_model(self) -> int:
        return sum(self.window_compute)

    @property
    def boxes(self) -> list[tuple[int, int, int, int]]:
        return [self.plan.tiles[g].box for w in self.plan.windows for g in w.tiles]

    @property
    def elements_checked(self) -> int:
        return sum((m1 - m0) * (n1 - n0) for m0, m1, n0, n1 in self.boxes)

    def image(self, program: Any, tensors: dict[str, np.ndarray]) -> np.ndarray:
        """The op's full-scale DRAM image with the window programs after it."""
        image = program_image(program, tensors, size=self.image_end)
        image[self.window_base:self.window_base + len(self.window_bytes)] = np.frombuffer(self.window_bytes,
                                                                                         np.uint8)
        return image

    def extend(self, image: np.ndarray) -> np.ndarray:
        """``image`` (the op's full DRAM image, as built for an exhaustive run) with the window
        programs after it."""
        if len(image) > self.window_base:
            raise SimulationError(f"the op's DRAM image ({len(image)} bytes) runs into the sampled check's window "
                                  f"programs at byte {self.window_base}")
        out = np.zeros(self.image_end, dtype=np.uint8)
        out[:len(image)] = image
        out[self.window_base:self.window_base + len(self.window_bytes)] = np.frombuffer(self.window_bytes, np.uint8)
        return out

    def entries(self, image: str, a: dict[str, Any], c: dict[str, Any]) -> list[dict[str, Any]]:
        """The testbench's entries, one per window (``_dram_program``'s instance format)."""
        last = len(self.loads) - 1
        return [{"image": image, "chunks": [list(x) for x in loads], "limit": 4 * total + 10_000, "a": a, "c": c,
                 "poke": i == 0, "read_c": i == last, "poke_ranges": [list(r) for r in self.poke_ranges],
                 "peek_ranges": [list(r) for r in self.peek_ranges]}
                for i, (loads, total) in enumerate(zip(self.loads, self.window_total, strict=True))]

    def compare(self, got: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(got, wrong)`` over the checked tiles: ``got`` as ``(1, m, n)``, ``wrong`` rows ``(0, m, n)``."""
        mask = np.zeros(expected.shape, dtype=bool)
        for m0, m1, n0, n1 in self.boxes:
            mask[m0:m1, n0:n1] = True
        wrong = np.argwhere(mask & (got != expected))
        return got[None], np.concatenate([np.zeros((len(wrong), 1), dtype=np.int64), wrong], axis=1)

    def summary(self) -> dict[str, Any]:
        plan, batch = self.plan, self.batch
        runs_total = plan.runs_total * batch
        return {
            "mode": "sampled",
            "runs_simulated": plan.runs_simulated, "runs_total": runs_total,
            "fraction_simulated": round(plan.runs_simulated / runs_total, 6) if runs_total else 0.0,
            "tiles_checked": plan.tiles_checked, "tiles_total": len(plan.tiles) * batch,
            "classes": plan.classes, "windows": len(plan.windows),
            "instances_simulated": 1, "instances_total": batch,
            "cycles_simulated_model": self.total_model,
            "cycles_skipped_model": plan.skipped_model + plan.total_model * (batch - 1),
            "op_cycles_model": plan.total_model * batch,
        }


def sampled_job(design: ArrayConfig, program: Any, batch: int, latency: int, rate: Fraction | None, *,
                rule: ClassRule = default_rule) -> SampledJob:
    """Plan, lay out and time the sampled check of ``program`` (see the module docstring).

    Raises:
        SimulationError: a program the sampled check cannot cut, or a class rule it refuses.
    """
    import perf_model

    def walk(commands: Any, base: int) -> Any:
        return perf_model.program_cycles(design, commands, queue_base=base, latency=latency, rate=rate)

    plan = plan_sampled(program, walk, rule=rule)
    base = -(-program.dram_bytes // _PAGE) * _PAGE
    loads, raw, end = window_layout(plan, program, base, program.data_bytes)
    totals, computes = [], []
    for window, queue_loads in zip(plan.windows, loads, strict=True):
        cmds = window.commands(program)
        parts = [walk(cmds[a:b], addr) for (a, b), (addr, _) in zip(window.chunks, queue_loads, strict=True)]
        totals.append(sum(p.total for p in parts))
        computes.append(sum(p.compute for p in parts))
    end = -(-(end + program.data_bytes) // _PAGE) * _PAGE  # the last fetch beat may run past the last command
    c_rows = _c_rows(program, plan)  # written as zeros first: a checked byte no STORE wrote reads 0, not X
    return SampledJob(plan, tuple(tuple(x) for x in loads), base, raw, end, tuple(totals), tuple(computes), batch,
                      _merge([(base, end), *_loaded(design, program, plan), *c_rows]), _merge(c_rows))


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _loaded(design: ArrayConfig, program: Any, plan: SampledPlan) -> list[tuple[int, int]]:
    """DRAM bytes the LOADs of the windows and their prologues read (only these need writing to DRAM)."""
    import perf_model
    from accel_spec.isa import Opcode

    beats = perf_model.word_beats(design)
    out = []
    for w in plan.windows:
        for cmd in w.commands(program):
            if cmd.opcode != Opcode.LOAD:
                continue
            size = cmd["words"] * perf_model.transfer_word_beats(cmd, beats, program.data_bytes) * program.data_bytes
            out += [(cmd["dram_addr"] + r * cmd["dram_stride"], cmd["dram_addr"] + r * cmd["dram_stride"] + size)
                    for r in range(cmd["rows"])]
    return out


def _c_rows(program: Any, plan: SampledPlan) -> list[tuple[int, int]]:
    """DRAM bytes of C holding the checked tiles."""
    c = program.tensors["c"]
    out = []
    for w in plan.windows:
        for g in w.tiles:
            m0, m1, n0, n1 = plan.tiles[g].box
            (r0, r1), (e0, e1) = ((n0, n1), (m0, m1)) if c.transposed else ((m0, m1), (n0, n1))
            row = [c.base + r * c.pitch for r in range(r0, r1)]  # a packed half byte rounds out to its byte
            out += [(at + int(e0 * c.elem_size), at + math.ceil(e1 * c.elem_size)) for at in row]
    return out

"""The driver's side of a sampled check: one op's windows in DRAM, the testbench entries, the check.

:mod:`accel_dse.simulate._sampled` decides what to simulate; this module lays the window programs
out after the op's full-scale DRAM image (each queue-load on a bus-beat boundary), times each
window with the model's walk of the same commands at the same addresses, hands the testbench one
entry per window (the image is written once, before the first; C is read once, after the last:
windows never store into a tile another window checks, see ``_sampled``) and checks the tiles
the windows produced.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np

from accel_dse.config import ArrayConfig
from accel_dse.simulate._dram_image import program_image
from accel_dse.simulate._sampled import ClassRule, SampledPlan, default_rule, plan_sampled, window_layout

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

    def entries(self, image: str, a: dict[str, Any], c: dict[str, Any]) -> list[dict[str, Any]]:
        """The testbench's entries, one per window (``_dram_program``'s instance format)."""
        last = len(self.loads) - 1
        return [{"image": image, "chunks": [list(x) for x in loads], "limit": 4 * total + 10_000, "a": a, "c": c,
                 "poke": i == 0, "poke_c": True, "read_c": i == last}
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
    return SampledJob(plan, tuple(tuple(x) for x in loads), base, raw, end, tuple(totals), tuple(computes), batch)

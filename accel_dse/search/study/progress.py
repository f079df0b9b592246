"""Progress of a sweep on a text stream: trials done / total, best so far, trials/s.

On a terminal one line is redrawn in place (at most 8 times a second); on a file or pipe
(an overnight log) a full line is written at most every 15 s and at the end.
"""

from __future__ import annotations

import time
from typing import TextIO

import optuna
from optuna.trial import TrialState

from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.space.metrics import unit_of
from accel_dse.search.study.study import budget_used
from accel_dse.search.study.summary import best_trials

__all__ = ["Progress"]


class Progress:
    """Draws the progress of one sweep.

    Args:
        stream: Where to write (``sys.stderr`` in the CLI), or ``None`` for no output.
        space: The space (for the objectives' names and units).
        total: Trials the study should reach (``--trials``).
    """

    def __init__(self, stream: TextIO | None, space: DesignSpace, total: int) -> None:
        self.stream = stream
        self.space = space
        self.total = total
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._period = 0.125 if self._tty else 15.0
        self._start = time.monotonic()
        self._last = 0.0
        self._done_at_start: int | None = None
        self._width = 0

    def _best(self, study: optuna.Study) -> str:
        best = best_trials(study, self.space, top=1)
        if not best:
            return "best: none yet"
        if self.space.is_multi_objective:
            return f"pareto: {len(best)} designs"
        o = self.space.objectives[0]
        return f"best {o.name}: {best[0].values[0]:.4g} {unit_of(o.metric)} (trial {best[0].number})"

    def update(self, study: optuna.Study, *, force: bool = False) -> None:
        """Redraw if enough time passed since the last draw (or ``force``)."""
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self._period:
            return
        self._last = now
        done = budget_used(study) - len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        if self._done_at_start is None:
            self._done_at_start = done
        rate = (done - self._done_at_start) / max(now - self._start, 1e-9)
        total = max(self.total, done)
        filled = int(20 * done / total) if total else 20
        bar = "#" * filled + "-" * (20 - filled)
        line = f"[{bar}] {done}/{total} trials  {self._best(study)}  {rate:.1f} trials/s"
        if self._tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self, study: optuna.Study | None = None) -> None:
        """Final draw and line end."""
        if self.stream is None:
            return
        if study is not None:
            self.update(study, force=True)
        if self._tty and self._width:
            self.stream.write("\n")
            self.stream.flush()

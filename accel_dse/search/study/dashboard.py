"""What a study shows in optuna-dashboard (or to ``optuna.load_study``): names, flat values, the feasible best.

* The objectives' names are the study's metric names (``study.metric_names``), so the
  dashboard labels its axes ``edp`` rather than ``Objective 0``.
* Each scored trial carries its decoded design and its main metrics as flat scalar user
  attributes, ``design.<field>`` (``design.rows = 32``, not ``log2_rows = 5``) and
  ``metric.<name>`` (``metric.area_mm2``), plus ``feasible`` (every constraint met), which the
  dashboard's trial table can sort and filter; the nested ``config`` / ``metrics`` attributes stay.
* The study's ``accel_dse.best_feasible`` user attribute holds the numbers of its best trials
  among those that meet every constraint (the best one for one objective, the Pareto set for
  several). optuna-dashboard 0.21 ranks trials by value alone, so its "best trial" can break
  a constraint; Optuna's own ``study.best_trial`` / ``best_trials`` do respect constraints.
* The same feasible best is written as the study's **note** (Markdown), which optuna-dashboard
  shows on the study's page and which its users can edit. accel-dse does not import
  optuna-dashboard: it writes the note in the dashboard's own storage format, the one its
  ``save_note`` writes (unchanged from 0.13 to 0.21; the tests read it back through the
  dashboard's web API): study system attributes ``dashboard:note_ver`` (an int, one more per
  edit: the dashboard refuses an edit based on an older version) and ``dashboard:note_str:0``,
  ``dashboard:note_str:1``, ... holding the body in pieces of at most
  :data:`NOTE_PIECE_CHARS` characters (pieces left from a longer note are blanked). The sweep
  owns the study note: it rewrites it whenever the feasible best changes, replacing what a user
  typed there (trial notes are left alone).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.study.summary import best_trials, free_values

__all__ = ["ATTR_BEST_FEASIBLE", "NOTE_PIECE_CHARS", "NOTE_VERSION_KEY", "NOTE_PIECE_PREFIX",
           "best_note", "mark_best", "name_metrics", "study_note", "write_study_note"]

#: Study user attribute: trial numbers of the feasible best (see the module notes).
ATTR_BEST_FEASIBLE = "accel_dse.best_feasible"
#: optuna-dashboard's study-note system attributes (see the module notes).
NOTE_VERSION_KEY = "dashboard:note_ver"
NOTE_PIECE_PREFIX = "dashboard:note_str:"
#: Longest piece of a note body in one system attribute (optuna-dashboard's limit).
NOTE_PIECE_CHARS = 2045
#: Pareto trials listed in the note (all of them are in :data:`ATTR_BEST_FEASIBLE`).
NOTE_MAX_TRIALS = 20


def name_metrics(study: optuna.Study, space: DesignSpace) -> None:
    """Set the study's metric names to the objectives' names (once)."""
    names = [o.name for o in space.objectives]
    if study.metric_names != names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def best_note(trials: list[FrozenTrial], space: DesignSpace) -> str:
    """The study note (Markdown) naming the feasible best ``trials`` with their values and designs."""
    several = len(space.objectives) > 1
    lines = ["## Feasible best (accel-dse)", ""]
    if not trials:
        lines.append("No trial meets every constraint yet.")
    else:
        lines.append(f"The Pareto set of the designs that meet every constraint: {len(trials)} trials."
                     if several else "The best design that meets every constraint:")
        lines.append("")
        for t in trials[:NOTE_MAX_TRIALS]:
            values = ", ".join(f"{o.name} = {_num(v)}" for o, v in zip(space.objectives, t.values, strict=True))
            design = ", ".join(f"{k} {_num(v)}" for k, v in free_values(space, t).items())
            lines.append(f"* **Trial {t.number}**: {values}; {design}")
        if len(trials) > NOTE_MAX_TRIALS:
            lines.append(f"* ... and {len(trials) - NOTE_MAX_TRIALS} more (all in the study's user attribute "
                         f"`{ATTR_BEST_FEASIBLE}`)")
    constraints = ", ".join(str(c) for c in space.constraints)
    lines += ["", (f"Constraints: {constraints}. " if constraints else "")
              + "The dashboard's own best trial ranks by value alone and can be a design that breaks a "
              "constraint (user attribute `feasible = false`). Written by `accel-dse sweep` at the end of "
              "each run; edits here are replaced when the best changes."]
    return "\n".join(lines)


def _note_attrs(body: str, old_pieces: int) -> dict[str, str]:
    """The note's piece attributes for ``body``, blanking pieces ``old_pieces`` left beyond them."""
    pieces = [body[i:i + NOTE_PIECE_CHARS] for i in range(0, len(body), NOTE_PIECE_CHARS)]
    pieces += [""] * (old_pieces - len(pieces))
    return {f"{NOTE_PIECE_PREFIX}{i}": piece for i, piece in enumerate(pieces)}


def study_note(system_attrs: Mapping[str, Any]) -> str:
    """The study note's body held in a study's system attributes (``""`` when there is none)."""
    pieces = {k: v for k, v in system_attrs.items() if k.startswith(NOTE_PIECE_PREFIX)}
    return "".join(str(pieces.get(f"{NOTE_PIECE_PREFIX}{i}", "")) for i in range(len(pieces)))


def write_study_note(study: optuna.Study, body: str) -> bool:
    """Make ``body`` the study's optuna-dashboard note (see the module notes); ``False`` if it already was."""
    storage, study_id = study._storage, study._study_id
    attrs = storage.get_study_system_attrs(study_id)
    if NOTE_VERSION_KEY in attrs and study_note(attrs) == body:
        return False
    old_pieces = sum(1 for k in attrs if k.startswith(NOTE_PIECE_PREFIX))
    for key, value in _note_attrs(body, old_pieces).items():
        storage.set_study_system_attr(study_id, key, value)
    # The version last: a reader that sees the new version sees the new body.
    storage.set_study_system_attr(study_id, NOTE_VERSION_KEY, int(attrs.get(NOTE_VERSION_KEY, 0)) + 1)
    return True


def mark_best(study: optuna.Study, space: DesignSpace) -> list[int]:
    """Record the feasible best trials in :data:`ATTR_BEST_FEASIBLE` and the study note; returns their numbers."""
    best = best_trials(study, space, top=1)
    numbers = [t.number for t in best]
    if study.user_attrs.get(ATTR_BEST_FEASIBLE) != numbers:
        study.set_user_attr(ATTR_BEST_FEASIBLE, numbers)
    write_study_note(study, best_note(best, space))
    return numbers

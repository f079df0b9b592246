"""Where an exported design comes from: a design file or preset, or a trial of a sweep study."""

from __future__ import annotations

import dataclasses
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ExportError
from accel_spec.text import parse_int

__all__ = ["DesignSource", "design_from_spec", "design_from_study", "parse_trial"]


@dataclasses.dataclass(frozen=True)
class DesignSource:
    """A design to export and its provenance.

    Attributes:
        config: The design.
        info: The ``source`` section of ``design.json``.
        workload: The workload it was chosen for (a study's first workload), ``None`` if unknown.
    """

    config: ArrayConfig
    info: dict[str, Any]
    workload: str | None = None


def design_from_spec(spec: str) -> DesignSource:
    """A design file or preset name (``accel_dse.design_files.load_design``)."""
    from accel_dse.design_files import load_design, preset_names

    config = load_design(spec)
    kind = "preset" if spec in preset_names() and "/" not in spec and not spec.endswith(".toml") else "file"
    return DesignSource(config, {"kind": kind, kind: spec})


def parse_trial(text: str) -> int | None:
    """``None`` for ``best``, else the trial number.

    Raises:
        ExportError: neither a non-negative integer nor ``best``.
    """
    value = str(text).strip()
    if value == "best":
        return None
    number = parse_int(value)
    if number is None or number < 0:
        raise ExportError(f"--trial must be a trial number (0, 1, ...) or 'best', not {text!r}")
    return number


def design_from_study(storage: str, study: str, trial: str, *, pick: str | None = None) -> DesignSource:
    """The design of trial ``trial`` (a number or ``best``) of ``study`` in ``storage``.

    ``best`` on a multi-objective study without ``pick`` takes ``StudyView.default_pick`` (the
    rule ``report`` uses too); ``info["how"]`` says how the trial was chosen.

    Raises:
        StorageError: the storage cannot be opened.
        ExportError: no such study or trial, a trial that did not complete, a trial without a
            recorded design.
    """
    from accel_dse.study_view import load_study, trial_config

    number = parse_trial(trial)
    view = load_study(storage, study)
    rule = (pick or view.default_pick()) if number is None else None
    chosen = view.best(rule) if number is None else view.trial(number)
    config = trial_config(chosen, study=f"study {view.name!r}")
    values = {o.name: float(v) for o, v in zip(view.objectives, chosen.values or (), strict=False)}
    info: dict[str, Any] = {
        "kind": "study",
        "storage": view.storage,
        "study": view.name,
        "trial": chosen.number,
        "selected_by": "number" if number is not None else (f"best, --pick {rule}" if rule else "best"),
        "how": (f"--trial {number}" if number is not None else view.pick_how(rule, given=pick is not None)),
        "objectives": values,
        "status": chosen.user_attrs.get("status"),
        "constraints": view.constraints,
    }
    rtl = view.verification(chosen.number)
    if rtl is not None:
        info["rtl_verification"] = rtl
    if view.space.get("fpga"):
        info["fpga_target"] = view.space["fpga"]
    workloads = view.workloads
    return DesignSource(config, info, workloads[0] if workloads else None)

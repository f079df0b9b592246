"""A finished or interrupted sweep study, loaded read-only from any storage, and its best trials.

:func:`load_study` opens a storage URL (``sqlite:///``, ``postgresql://``, ``journal:``) without
creating anything, finds the study (or lists the studies the storage holds) and wraps it in a
:class:`StudyView` that knows the sweep's objectives, workloads and constraints (the study's
``accel_dse.*`` user attributes written by ``accel-dse sweep``), ranks the feasible trials
(Pareto layers for several objectives), resolves ``--trial N|best`` and ``--pick`` rules, and
reads the RTL verification results of ``accel-dse verify``.

RTL results are study user attributes ``accel_dse.verify.<trial number>``: Optuna refuses to
change the user attributes of a finished trial, so :func:`StudyView.verification` joins them
back to their trials.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from accel_dse.storage_failure import storage_cause
from accel_spec.config import ArrayConfig
from accel_spec.errors import AccelDseError, ConfigError, ExportError, StorageError

__all__ = ["ObjectiveInfo", "StudyView", "load_study", "trial_config", "trial_table", "VERIFY_ATTR_PREFIX",
           "pick_choices"]

#: Study user attribute prefix of the RTL verification result of one trial.
VERIFY_ATTR_PREFIX = "accel_dse.verify."


@dataclasses.dataclass(frozen=True)
class ObjectiveInfo:
    """One objective of a study.

    Attributes:
        name: Short name (``"edp"``) or ``"value<i>"`` for a study not made by accel-dse.
        metric: The metric it reads (``"edp"``), ``None`` when unknown.
        direction: ``"minimize"`` or ``"maximize"``.
    """

    name: str
    metric: str | None
    direction: str

    @property
    def sign(self) -> float:
        """+1 when smaller is better, -1 when larger is better."""
        return 1.0 if self.direction == "minimize" else -1.0


def _optuna() -> Any:
    import optuna

    return optuna


def load_study(storage_url: str, study_name: str, *, read_only: bool = True) -> StudyView:
    """Open ``study_name`` in ``storage_url`` (nothing is created).

    Args:
        storage_url: The storage.
        study_name: The study.
        read_only: Open the storage read-only (``report``, ``export``: the file's bytes never
            change); ``False`` for ``verify``, which records its results in the study.

    Raises:
        StorageError: a malformed URL, a storage file that does not exist, is not a regular file,
            is empty, is not an Optuna storage (another application's database: left untouched)
            or cannot be read.
        ExportError: no study of that name (the message lists the studies there).
    """
    from accel_dse.search import check_location, open_storage, parse_storage, redact

    spec = parse_storage(storage_url)
    if spec.kind == "memory":
        raise StorageError("storage 'memory:' holds no studies once its process ended; give a file or database URL")
    check_location(spec)
    if spec.path is not None and not spec.path.is_file():
        raise StorageError(f"storage file {str(spec.path)!r} of {spec.display!r} is not found")
    optuna = _optuna()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = open_storage(spec, heartbeat_interval=None, read_only=read_only, create=False)
        try:
            names = optuna.get_all_study_names(storage)
        except Exception as exc:  # noqa: BLE001 - a corrupt file or a server error: one line
            detail = redact((str(exc).splitlines() or [type(exc).__name__])[0], spec.url)
            raise StorageError(f"cannot read studies from {spec.display!r}: {detail}") from None
        if study_name not in names:
            listed = ", ".join(sorted(names)) if names else "it holds no studies"
            raise ExportError(f"no study {study_name!r} in {spec.display} (studies: {listed})")
        study = optuna.load_study(study_name=study_name, storage=storage)
    return StudyView(study=study, storage=spec.display)


def _listed(table: Mapping[str, Any], key: str) -> list[Any]:
    """``table[key]`` if it is a list (a study another tool wrote may hold anything), else ``[]``."""
    value = table.get(key)
    return value if isinstance(value, list) else []


def trial_table(trial: Any, key: str) -> dict[str, Any]:
    """The trial's user attribute ``key`` if it is a table (``config``, ``metrics``), else ``{}``.

    A study another tool wrote may hold anything under these names; what is not a table is ignored.
    """
    value = trial.user_attrs.get(key)
    return dict(value) if isinstance(value, Mapping) else {}


def trial_config(trial: Any, *, study: str = "the study") -> ArrayConfig:
    """The ``ArrayConfig`` a trial recorded in its ``config`` user attribute.

    Raises:
        ExportError: the trial has no (valid) ``config`` attribute.
    """
    data = trial.user_attrs.get("config")
    if not isinstance(data, Mapping):
        raise ExportError(
            f"trial {trial.number} of {study} has no 'config' user attribute (not written by accel-dse sweep)"
        )
    try:
        return ArrayConfig.from_dict(data, where=f"trial {trial.number} config")
    except ConfigError as exc:
        raise ExportError(f"trial {trial.number} of {study}: {exc}") from None


@dataclasses.dataclass
class StudyView:
    """A study and what the sweep recorded about it.

    Attributes:
        study: The ``optuna.Study``.
        storage: The storage URL as shown to users (password masked).
    """

    study: Any
    storage: str

    # -- what the sweep searched -------------------------------------------------------------
    @property
    def name(self) -> str:
        """The study name."""
        return str(self.study.study_name)

    @property
    def attrs(self) -> dict[str, Any]:
        """The study's user attributes."""
        return dict(self.study.user_attrs)

    @property
    def objectives(self) -> tuple[ObjectiveInfo, ...]:
        """The objectives, from ``accel_dse.objectives`` (else generic names from the directions)."""
        from accel_dse.search import OBJECTIVES

        directions = [d.name.lower() for d in self.study.directions]
        names = self.attrs.get("accel_dse.objectives")
        out = []
        for i, direction in enumerate(directions):
            name = names[i] if isinstance(names, list) and i < len(names) and isinstance(names[i], str) else f"value{i}"
            metric = OBJECTIVES[name][0] if name in OBJECTIVES else None
            out.append(ObjectiveInfo(str(name), metric, direction))
        return tuple(out)

    @property
    def multi_objective(self) -> bool:
        """Whether the study has several objectives (its answer is a Pareto set)."""
        return len(self.study.directions) > 1

    @property
    def space(self) -> dict[str, Any]:
        """The sweep's canonical space (``accel_dse.space``), ``{}`` if not recorded."""
        space = self.attrs.get("accel_dse.space")
        return dict(space) if isinstance(space, Mapping) else {}

    @property
    def workloads(self) -> list[str]:
        """Workload specs of the sweep, in the space's order (empty if not recorded)."""
        return [str(w["spec"]) for w in _listed(self.space, "workloads") if isinstance(w, Mapping) and "spec" in w]

    @property
    def constraints(self) -> list[str]:
        """The sweep's constraints as text (``"area_mm2 <= 4"``)."""
        return [str(c) for c in _listed(self.space, "constraints")]

    # -- trials ------------------------------------------------------------------------------
    def trials(self) -> list[Any]:
        """Every trial, in number order."""
        return list(self.study.get_trials(deepcopy=False))

    def state_counts(self) -> dict[str, int]:
        """Trials per state name (``COMPLETE``, ``FAIL``, ``RUNNING``, ...)."""
        counts: dict[str, int] = {}
        for t in self.trials():
            counts[t.state.name] = counts.get(t.state.name, 0) + 1
        return counts

    def feasible(self) -> list[Any]:
        """COMPLETE trials with finite values meeting every constraint, one per design."""
        from accel_dse.search import feasible_trials

        return feasible_trials(self.study)

    def scores(self, trials: list[Any]) -> np.ndarray:
        """Objective values of ``trials`` turned into minimisation form, ``(len, objectives)``."""
        signs = np.array([o.sign for o in self.objectives])
        if not trials:
            return np.zeros((0, len(signs)))
        return np.array([t.values for t in trials], dtype=float) * signs

    def pareto(self) -> list[Any]:
        """The Pareto set of the feasible trials (the best one for a single objective)."""
        ranked = self.ranked_layers()
        return ranked[0] if ranked else []

    def ranked_layers(self) -> list[list[Any]]:
        """Feasible trials in non-dominated layers, each sorted by the objectives in order.

        One objective: every trial is its own layer, best first.
        """
        from accel_dse.search import pareto_mask

        trials = self.feasible()
        scores = self.scores(trials)
        if not trials:
            return []
        if scores.shape[1] == 1:
            order = np.argsort(scores[:, 0], kind="stable")
            return [[trials[i]] for i in order]
        layers, left = [], np.arange(len(trials))
        while left.size:
            mask = pareto_mask(scores[left])
            layer = left[mask]
            layer = layer[np.lexsort(scores[layer].T[::-1])]
            layers.append([trials[i] for i in layer])
            left = left[~mask]
        return layers

    def ranked(self) -> list[Any]:
        """Feasible trials best first: the Pareto set, then the next layers."""
        return [t for layer in self.ranked_layers() for t in layer]

    def top(self, k: int) -> list[Any]:
        """The ``k`` best feasible trials (Pareto set first)."""
        return self.ranked()[:k]

    def trial(self, number: int) -> Any:
        """Trial ``number``, which must be COMPLETE.

        Raises:
            ExportError: no such trial, or it is not COMPLETE (a FAIL trial names its reason).
        """
        trials = self.trials()
        found = next((t for t in trials if t.number == number), None)
        if found is None:
            span = f"trials 0..{trials[-1].number}" if trials else "it has no trials"
            raise ExportError(f"trial {number} is not in study {self.name!r} ({span})")
        if found.state.name != "COMPLETE":
            status = found.user_attrs.get("status")
            reason = found.user_attrs.get("reason")
            why = f" ({status}: {reason})" if status and reason else (f" ({status})" if status else "")
            raise ExportError(
                f"trial {number} of study {self.name!r} is {found.state.name}{why}, not COMPLETE: pick a "
                "completed trial or --trial best"
            )
        return found

    def best(self, pick: str | None = None) -> Any:
        """The best feasible trial; with several objectives ``pick`` (``"min-edp"``) chooses it.

        Raises:
            ExportError: no feasible trial, or several objectives and no (valid) ``pick``.
        """
        layers = self.ranked_layers()
        if not layers:
            raise ExportError(f"study {self.name!r} has no feasible COMPLETE trial yet ({self._states_text()})")
        front = layers[0]
        if pick is None:
            if self.multi_objective:
                names = ", ".join(o.name for o in self.objectives)
                raise ExportError(
                    f"study {self.name!r} has {len(self.objectives)} objectives ({names}), so --trial best needs "
                    f"a --pick rule choosing one of its {len(front)} Pareto designs, e.g. --pick min-edp "
                    f"(choices: {', '.join(pick_choices(self))}, or min-/max- any metric)"
                )
            return front[0]
        sign, key = self.parse_pick(pick)
        values = [self.pick_value(t, key) for t in front]
        usable = [(v, i) for i, v in enumerate(values) if v is not None]
        if not usable:
            raise ExportError(f"--pick {pick}: no Pareto design of study {self.name!r} records {key!r}")
        best = min(usable, key=lambda item: (sign * item[0], item[1]))
        return front[best[1]]

    def default_pick(self) -> str | None:
        """The ``--pick`` rule ``report`` and ``export --trial best`` use when none is given.

        ``None`` for one objective (the best trial is the best value). With several objectives:
        ``min-edp`` whenever the Pareto designs record EDP (as an objective or a metric), else the
        first objective in its own direction (``max-`` for a maximised one: its best, never its worst).
        """
        if not self.multi_objective:
            return None
        front = self.pareto()
        if any(self.pick_value(t, "edp") is not None for t in front):
            return "min-edp"
        return pick_choices(self)[0]

    @staticmethod
    def pick_how(pick: str | None, *, given: bool) -> str:
        """How ``best(pick)`` chose, in words (``report`` and ``export`` print the same)."""
        if pick is None:
            return "the best feasible design (one objective)"
        if given:
            return f"picked by --pick {pick} on the Pareto set"
        return (f"picked by {pick} on the Pareto set (the default of report and export --trial best when "
                "--pick is not given: min-edp when EDP is recorded, else the first objective)")

    def parse_pick(self, pick: str) -> tuple[float, str]:
        """``(sign, key)`` of a ``min-KEY``/``max-KEY`` rule (sign +1 for min).

        Raises:
            ExportError: a malformed rule or an unknown key.
        """
        from accel_dse.search import METRIC_NAMES, OBJECTIVES

        text = str(pick).strip()
        head, _, key = text.partition("-")
        known = {o.name for o in self.objectives} | set(OBJECTIVES) | set(METRIC_NAMES)
        if head not in ("min", "max") or not key:
            raise ExportError(f"--pick must read min-NAME or max-NAME (e.g. min-edp), not {text!r}")
        if key not in known:
            raise ExportError(
                f"--pick {text}: unknown objective or metric {key!r} (choices: {', '.join(pick_choices(self))}, "
                f"or min-/max- one of {', '.join(METRIC_NAMES)})"
            )
        return (1.0 if head == "min" else -1.0), key

    def pick_value(self, trial: Any, key: str) -> float | None:
        """The value a pick rule compares: an objective's value, else a recorded metric."""
        from accel_dse.search import OBJECTIVES

        for i, o in enumerate(self.objectives):
            if o.name == key and trial.values is not None:
                return float(trial.values[i])
        metric = OBJECTIVES[key][0] if key in OBJECTIVES else key
        value = trial_table(trial, "metrics").get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return None

    def _states_text(self) -> str:
        counts = self.state_counts()
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no trials"

    # -- RTL verification --------------------------------------------------------------------
    def verification(self, number: int) -> dict[str, Any] | None:
        """The RTL verification result recorded for trial ``number`` (``None`` if never verified)."""
        value = self.attrs.get(f"{VERIFY_ATTR_PREFIX}{number}")
        return dict(value) if isinstance(value, Mapping) else None

    def verifications(self) -> dict[int, dict[str, Any]]:
        """Trial number -> RTL verification result, for every verified trial."""
        out = {}
        for key, value in self.attrs.items():
            if key.startswith(VERIFY_ATTR_PREFIX) and isinstance(value, Mapping):
                try:
                    out[int(key[len(VERIFY_ATTR_PREFIX):])] = dict(value)
                except ValueError:
                    continue
        return dict(sorted(out.items()))

    def check_writable(self) -> None:
        """Refuse now, not after hours of simulation, a storage that opens but takes no write.

        The probe writes nothing: a database runs an ``UPDATE`` that matches no row, in a
        transaction it rolls back (SQLite takes its write lock for it, so a read-only or immutable
        file, a read-only transaction or a missing privilege fails here); a journal file is opened
        for appending and closed unwritten. Other storages are not probed.

        Raises:
            StorageError: the storage refused the probe (its cause named).
        """
        storage = self.study._storage
        storage = getattr(storage, "_backend", storage)  # the cache of an RDB storage; a journal's backend
        try:
            engine = getattr(storage, "engine", None)
            path = getattr(storage, "_file_path", None)
            if engine is not None:
                import sqlalchemy

                with engine.connect() as connection:
                    try:
                        connection.execute(sqlalchemy.text("UPDATE studies SET study_name = study_name WHERE 1 = 0"))
                    finally:
                        connection.rollback()
            elif path is not None:
                with open(path, "ab"):
                    pass
        except Exception as exc:  # noqa: BLE001 - any storage failure: one line
            cause = storage_cause(exc) or (str(exc).splitlines() or [type(exc).__name__])[0]
            raise StorageError(f"cannot record RTL results in {self.storage}: it takes no write ({cause})") from None

    def record_verification(self, number: int, result: Mapping[str, Any]) -> None:
        """Store the RTL verification result of trial ``number`` (replacing an older one).

        Raises:
            StorageError: the storage refused the write.
        """
        try:
            self.study.set_user_attr(f"{VERIFY_ATTR_PREFIX}{number}", dict(result))
        except AccelDseError:
            raise
        except Exception as exc:  # noqa: BLE001 - any storage failure: one line
            cause = storage_cause(exc) or str(exc)
            raise StorageError(f"cannot record the RTL result of trial {number} in {self.storage}: {cause}") from None


def pick_choices(view: StudyView) -> list[str]:
    """The ``--pick`` rules suggested for ``view``: its objectives' own directions, then min-edp."""
    rules = [f"{'min' if o.direction == 'minimize' else 'max'}-{o.name}" for o in view.objectives]
    if "min-edp" not in rules:
        rules.append("min-edp")
    return rules

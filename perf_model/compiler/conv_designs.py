"""A conv's on-chip figures over many designs at once (the sweep's conv scorer, vectorised over designs).

:func:`~perf_model.compiler.conv_score.conv_figures` scores one conv on one design. A sweep
scores it on thousands to millions; most of them differ only in what a conv program does not
see (node, clock, DRAM part at the same pacing) or in their buffer sizes, which only decide
which of one ranking's tilings fits (``conv_search``). So the designs are grouped, with no
Python loop per design:

* a *unit*: the designs a conv program cannot tell apart (every ``ArrayConfig`` field but the
  node, clock and DRAM part, and the effective DRAM rate: ``conv_score.design_key``);
* an *array group*: the units that differ in their three buffer sizes only. Each array group has
  one ranking of candidate tilings per conv form; every unit's tiling is the first candidate
  fitting its buffers, found for all units of the group at once (``conv_search.conv_tilings``),
  and each distinct tiling is scored once (``conv_score.tilings_figures``: the schedule counted by
  runs, the tilings of every group searched in this call in one batch, ``conv_batch``). The forms
  (``conv_forms``) are compared per unit with numpy, by the scalar rule.

Python loops run over array groups (distinct arrays, bus widths, bufferings and DRAM rates: a few
hundred in a sweep's space), forms and distinct tilings, never over designs. A group on a paced
DRAM (``dram_rate`` not ``None``: its figures come from the program walk) is scored unit by unit
with the scalar scorer, still once per unit.

API (what the network walk calls):

* ``groups = design_groups(designs)`` once per ``DesignArrays`` (shared by every conv);
* ``res = conv_designs(groups, conv, requant)``: a :class:`ConvDesigns`, arrays over designs:

  - ``status`` (``NOT_SERVED`` the design builds no windows, ``INFEASIBLE`` no tiling fits,
    ``ON_CHIP``), ``reason`` (index into ``texts``, -1 on chip);
  - ``figure``: index into ``figures`` (the distinct ``ConvFigures``, equal to the scalar
    scorer's for that design, its form included), -1 off chip;
  - ``tiling``: index into ``tilings`` (the ``(ConvTiling, steps)`` of the kept form), -1 off chip;
  - :meth:`ConvDesigns.column` gathers one figure over designs (``total``, ``compute``, ``folds``,
    ``dram_bytes`` ...) as a float array, off-chip designs 0.

Tests: ``tests/perf_model/test_model_conv_designs.py`` (equal to ``conv_figures`` on random
designs and convs).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model import timing
from perf_model._memory_parts import effective_dram_bytes_per_cycle
from perf_model.arrays.designs import DesignArrays
from perf_model.compiler.conv_forms import candidates, describe, host_writes
from perf_model.compiler.conv_geometry import ConvTiling, conv_served
from perf_model.compiler.conv_score import conv_figures, tilings_figures
from perf_model.compiler.conv_search import conv_tilings, infeasible_detail, prefill, reason_subject, shape_key
from perf_model.evaluator.conv_ops import ConvFigures
from perf_model.program_timing import BUFFER_FIELDS, PROGRAM_BLIND_FIELDS, dram_rate
from workloads.ops import Conv2d

__all__ = ["NOT_SERVED", "INFEASIBLE", "ON_CHIP", "DesignGroups", "ConvDesigns", "design_groups", "conv_designs"]

#: ``ConvDesigns.status`` codes.
NOT_SERVED, INFEASIBLE, ON_CHIP = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class DesignGroups:
    """Designs grouped by what a conv program sees (module docstring).

    ``unit``: per design its unit; ``unit_rep``: per unit one design; ``unit_group``: per unit its
    array group; ``kib``: ``(U, 3)`` buffer KiB per unit; ``configs``: per array group one design as
    an ``ArrayConfig``; ``served``: per group ``""`` or why it builds no windows; ``paced``: per
    group whether its DRAM is paced.
    """

    designs: DesignArrays
    unit: np.ndarray
    unit_rep: np.ndarray
    unit_group: np.ndarray
    kib: np.ndarray
    configs: list[ArrayConfig]
    served: list[str]
    paced: list[bool]
    members: list[np.ndarray]  # per group, its units
    keys: list[tuple[float, ...]]  # per group, its array's fields (what its units share)
    unit_configs: dict[int, ArrayConfig] = dataclasses.field(default_factory=dict)

    def score(self, conv: Conv2d, requant: bool) -> ConvDesigns:
        """:func:`conv_designs` of these designs."""
        return conv_designs(self, conv, requant)

    def unit_config(self, u: int) -> ArrayConfig:
        """Unit ``u``'s design as an ``ArrayConfig`` (made once)."""
        config = self.unit_configs.get(u)
        if config is None:
            config = self.unit_configs[u] = self.designs.config(int(self.unit_rep[u]))
        return config


def design_groups(designs: DesignArrays) -> DesignGroups:
    """Group ``designs`` into units and array groups (module docstring)."""
    names = [f.name for f in dataclasses.fields(designs) if f.name not in PROGRAM_BLIND_FIELDS]
    rate = effective_dram_bytes_per_cycle(designs.dram_bytes_per_cycle, designs.dram, designs.clock_mhz)
    columns = np.stack([np.asarray(getattr(designs, n), dtype=np.float64) for n in names] + [rate], axis=1)
    unit_keys, unit_rep, unit = np.unique(columns, axis=0, return_index=True, return_inverse=True)
    buffers = [names.index(b) for b in BUFFER_FIELDS]
    array_cols = [i for i in range(unit_keys.shape[1]) if i not in buffers]
    group_keys, group_rep, unit_group = np.unique(unit_keys[:, array_cols], axis=0, return_index=True,
                                                  return_inverse=True)
    unit_group = unit_group.reshape(-1)
    configs = [designs.config(int(unit_rep[u])) for u in group_rep.tolist()]
    order = np.argsort(unit_group, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(unit_group, minlength=len(configs)))[:-1])
    return DesignGroups(designs, unit.reshape(-1), unit_rep, unit_group, unit_keys[:, buffers].astype(np.int64),
                        configs, [conv_served(c) for c in configs], [dram_rate(c) is not None for c in configs],
                        members, [tuple(k) for k in group_keys.tolist()])


@dataclasses.dataclass(frozen=True)
class ConvDesigns:
    """One conv on every design of a :class:`DesignGroups` (module docstring)."""

    status: np.ndarray
    reason: np.ndarray
    texts: list[str]
    figure: np.ndarray
    figures: list[ConvFigures]
    tiling: np.ndarray
    tilings: list[tuple[ConvTiling, tuple[str, ...]]]

    def column(self, pick: Callable[[ConvFigures], float]) -> np.ndarray:
        """``pick(figures)`` per design (0 where the conv is not on chip), float."""
        table = np.array([float(pick(f)) for f in self.figures] + [0.0])  # -1 (off chip) takes the 0
        return table[self.figure]

    def at(self, i: int) -> ConvFigures | str:
        """Design ``i``'s result as the scalar scorer gives it: figures (feasible or not) or why no windows."""
        if self.status[i] == NOT_SERVED:
            return self.texts[int(self.reason[i])]
        if self.status[i] == INFEASIBLE:
            return ConvFigures(False, self.texts[int(self.reason[i])])
        return self.figures[int(self.figure[i])]


def dram_bytes(f: ConvFigures) -> float:
    """DRAM bytes read and written (the scalar scorer's rank's second key)."""
    return sum(f.read) + sum(f.write)


class _Table:
    """Per unit results being filled: status, text index, figure index, tiling index."""

    def __init__(self, units: int) -> None:
        self.status = np.zeros(units, dtype=np.int8)
        self.reason = np.full(units, -1, dtype=np.int64)
        self.figure = np.full(units, -1, dtype=np.int64)
        self.tiling = np.full(units, -1, dtype=np.int64)
        self.texts: dict[str, int] = {}
        self.figures: dict[ConvFigures, int] = {}
        self.tilings: dict[tuple[ConvTiling, tuple[str, ...]], int] = {}

    def text(self, text: str) -> int:
        return self.texts.setdefault(text, len(self.texts))

    def add(self, figures: ConvFigures) -> int:
        return self.figures.setdefault(figures, len(self.figures))

    def add_tiling(self, form: tuple[ConvTiling, tuple[str, ...]]) -> int:
        return self.tilings.setdefault(form, len(self.tilings))


def conv_designs(groups: DesignGroups, conv: Conv2d, requant: bool) -> ConvDesigns:
    """``conv`` (all its images, one program) on every design of ``groups`` (module docstring)."""
    table = _Table(len(groups.unit_rep))
    # The unpaced groups: kept (``_GROUPS``), or searched, then every distinct tiling of the
    # searched ones scored in one batch.
    kept: dict[int, _Held] = {}
    new: dict[int, tuple[object, ...]] = {}
    for g, units in enumerate(groups.members):
        if not groups.served[g] and not groups.paced[g]:
            key: tuple[object, ...] = (groups.keys[g], shape_key(conv), requant, groups.kib[units].tobytes())
            held = _GROUPS.get(key)
            if held is not None:
                kept[g] = held
            else:
                new[g] = key
    # their candidate tilings built for all their arrays at once, then each group's searched
    prefill([(groups.configs[g], form, requant) for g in new for _, form in candidates(conv, groups.configs[g].rows)])
    found: dict[int, tuple[tuple[object, ...], np.ndarray, list[_Form]]] = {}
    for g, key in new.items():
        rooms = _rooms(groups.configs[g], groups.kib[groups.members[g]])
        found[g] = key, rooms, _search(groups.configs[g], rooms, conv, requant)
    items = [(groups.configs[g], form, requant, t) for g, (_, _, forms) in found.items()
             for _, form, _, tilings in forms for t in tilings]
    scored = iter(tilings_figures(items))
    for g, (key, rooms, forms) in found.items():
        kept[g] = _kept_group(key, groups.configs[g], rooms, forms, [[next(scored) for _ in f[3]] for f in forms],
                              conv, requant)
    for g, units in enumerate(groups.members):
        if groups.served[g]:
            table.status[units] = NOT_SERVED
            table.reason[units] = table.text(groups.served[g])
        elif groups.paced[g]:
            for u in units.tolist():
                _scalar(table, u, conv_figures(groups.unit_config(u), conv, requant), groups.unit_config(u), conv,
                        requant)
    if kept:
        _place(table, [groups.members[g] for g in kept], list(kept.values()), reason_subject(conv))
    u = groups.unit
    return ConvDesigns(table.status[u], table.reason[u], list(table.texts), table.figure[u], list(table.figures),
                       table.tiling[u], list(table.tilings))


def _scalar(table: _Table, u: int, figures: ConvFigures | str, config: ArrayConfig, conv: Conv2d,
            requant: bool) -> None:
    """Put the scalar scorer's result for unit ``u`` in the table (paced groups)."""
    if isinstance(figures, str):
        table.status[u], table.reason[u] = NOT_SERVED, table.text(figures)
    elif not figures.feasible:
        table.status[u], table.reason[u] = INFEASIBLE, table.text(figures.reason)
    else:
        table.status[u], table.figure[u] = ON_CHIP, table.add(figures)


def _rooms(config: ArrayConfig, kib: np.ndarray) -> np.ndarray:
    """``(U, 3)`` words a tile may use per buffer (``conv_geometry._room``) for buffers of ``kib`` KiB."""
    el = timing.word_elems(timing.dataflow_code(config.dataflow.value), config.rows, config.cols)
    bits = config.buffer_bits
    depth = np.stack([timing.buffer_depth_words(kib[:, i], int(el[i]), bits[i]) for i in range(3)], axis=1)
    return depth // 2 if config.double_buffered else depth


#: Per array group, conv shape (``conv_search.shape_key``: the convs of a network that differ in
#: their names alone share it), requant and buffer sizes of its units: the group's results
#: ``(status, reason, figure, tiling)`` per unit, indices into the infeasible reasons (without the
#: conv's name, ``conv_search.infeasible_detail``), figures and tilings kept with them (a sweep
#: meets a group's designs again: the next pass, another conv of the same shape, or another
#: workload's). The reasons name the conv, so the name is put before them per call.
_Held = tuple[np.ndarray, list[str], list[ConvFigures], list[tuple[ConvTiling, tuple[str, ...]]]]
_GROUPS: dict[tuple[object, ...], _Held] = {}
_GROUPS_SIZE = 1 << 15


#: One conv form's search on an array group: its reshapes, the conv it runs, per unit the index of
#: its tiling (-1 none fits) and the distinct tilings.
_Form = tuple[tuple[str, ...], Conv2d, np.ndarray, list[ConvTiling]]


def _search(config: ArrayConfig, rooms: np.ndarray, conv: Conv2d, requant: bool) -> list[_Form]:
    """The tilings of every form of ``conv`` on the units of one unpaced array group (``rooms``: :func:`_rooms`)."""
    out = []
    for steps, form in candidates(conv, config.rows):
        index, tilings = conv_tilings(config, form, rooms, requant=requant)
        out.append((steps, form, index, tilings))
    return out


def _kept_group(full: tuple[object, ...], config: ArrayConfig, rooms: np.ndarray, forms: list[_Form],
                figures: list[list[ConvFigures]], conv: Conv2d, requant: bool) -> _Held:
    """An unpaced array group's results (:func:`_group`) from its searched forms and their tilings'
    figures, kept in :data:`_GROUPS` under ``full``."""
    own = _Table(len(rooms))
    details = _group(own, config, rooms, forms, figures, conv, requant)
    held = (np.stack([own.status.astype(np.int64), own.reason, own.figure, own.tiling]), details,
            list(own.figures), list(own.tilings))
    if len(_GROUPS) >= _GROUPS_SIZE:
        _GROUPS.clear()
    _GROUPS[full] = held
    return held


def _place(table: _Table, members: list[np.ndarray], held: list[_Held], what: str) -> None:
    """Put the results of unpaced array groups (``held``, of the units ``members``) in the table, all
    at once: their indices shifted past the groups before, then mapped to the table's (the
    reasons named ``what``)."""
    units = np.concatenate(members)
    rows = np.concatenate([h[0] for h in held], axis=1)
    sizes = [len(m) for m in members]
    for r, (column, add) in enumerate(((table.reason, lambda d: table.text(f"{what}: {d}")),
                                      (table.figure, table.add), (table.tiling, table.add_tiling)), start=1):
        lists = [h[r] for h in held]
        counts = np.array([len(x) for x in lists], dtype=np.int64)
        ids = np.array([add(x) for x in itertools.chain.from_iterable(lists)] + [-1], dtype=np.int64)
        shift = np.repeat(np.cumsum(counts) - counts, sizes)
        column[units] = ids[np.where(rows[r] >= 0, rows[r] + shift, -1)]
    table.status[units] = rows[0]


@functools.lru_cache(maxsize=1 << 12)
def _form_words(conv: Conv2d, steps: tuple[str, ...]) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A reshaped form's ``form`` (``conv_forms.describe``) and ``host_writes``, kept per conv and steps."""
    return describe(conv, steps), host_writes(conv, steps)


def _group(table: _Table, config: ArrayConfig, rooms: np.ndarray, forms: list[_Form],
           figures: list[list[ConvFigures]], conv: Conv2d, requant: bool) -> list[str]:
    """``conv`` on the units of one unpaced array group (``rooms``), every form at once, from each
    form's search (:func:`_search`) and its tilings' figures: per unit the form of fewer cycles,
    then fewer DRAM bytes. The reasons of infeasible units are left as indices into the distinct
    reasons without the conv's name (``infeasible_detail``), returned (:func:`_place` names the conv)."""
    n = len(rooms)
    feasible = np.zeros(n, dtype=bool)
    total = np.zeros(n, dtype=np.int64)
    moved = np.zeros(n, dtype=np.float64)
    figure = np.full(n, -1, dtype=np.int64)
    tiling = np.full(n, -1, dtype=np.int64)
    reason = np.full(n, -1, dtype=np.int64)
    bad: list[str] = []
    for f, ((steps, form, index, tilings), scored) in enumerate(zip(forms, figures, strict=True)):
        if steps:
            words, writes = _form_words(conv, steps)
            scored = [dataclasses.replace(s, form=words, steps=steps, host_writes=writes) for s in scored]
        ids = np.array([table.add(s) for s in scored] + [-1], dtype=np.int64)[index]
        t_ids = np.array([table.add_tiling((t, steps)) for t in tilings] + [-1], dtype=np.int64)[index]
        totals = np.array([s.total for s in scored] + [0], dtype=np.int64)[index]
        bytes_ = np.array([dram_bytes(s) for s in scored] + [0.0])[index]
        ok = index >= 0
        if f == 0:
            take = ok
            none = np.flatnonzero(~ok)
            if len(none):  # the conv's own reason, per distinct (ifmap, weight) room
                rooms_bad = rooms[none]
                keys, inverse = np.unique(rooms_bad, axis=0, return_inverse=True)
                bad = [infeasible_detail(config, form, (i, w, o), requant) for i, w, o in keys.tolist()]
                reason[none] = inverse.reshape(-1)
        else:
            take = ok & (~feasible | (totals < total) | ((totals == total) & (bytes_ < moved)))
        feasible |= ok
        total = np.where(take, totals, total)
        moved = np.where(take, bytes_, moved)
        figure = np.where(take, ids, figure)
        tiling = np.where(take, t_ids, tiling)
    table.status[:] = np.where(feasible, ON_CHIP, INFEASIBLE)
    table.figure[:] = figure
    table.tiling[:] = tiling
    table.reason[:] = np.where(feasible, -1, reason)
    return bad

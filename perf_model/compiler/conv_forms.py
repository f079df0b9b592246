"""The forms a conv may run in on chip: as it is, or over an input the host reshapes first.

A form is a sequence of reshapes, each an exact rewrite of the conv with the host's work on its
input and the weights to match (the integer outputs are the conv's):

* ``"s2d"``: space-to-depth (``space_to_depth``), a strided conv as a stride-1 one;
* ``"stack"``: row stacking (``row_stack``), the kernel's rows stacked as channels;
* ``"im2col"``: every window as the channels of one pixel (``im2col_form``), a 1x1 conv: the host's
  im2col GEMM as a conv program (a network's first conv, ``conv_network``'s ``input_form``; not
  among the per-op :func:`candidates`, which score the host's GEMM as such).

:func:`candidates` lists the forms worth scoring on an array of ``rows`` rows: as it is, then
space-to-depth and row stacking where the reshaped pixel still fits one ifmap word (``c_in' <=
rows``; more channels fill the array's rows as it is), then row stacking after space-to-depth.
``conv_score.conv_figures`` scores each and keeps the one of fewest total cycles; ``simulate`` runs
that form on the host-reshaped input (:func:`reshape_input`, :func:`reshape_weights`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from perf_model.compiler.im2col_form import im2col_conv, im2col_form, im2col_input, im2col_weights
from perf_model.compiler.row_stack import stack_conv, stack_form, stack_input, stack_weights
from perf_model.compiler.space_to_depth import s2d_conv, s2d_form, s2d_input, s2d_weights
from workloads.ops import Conv2d

__all__ = ["STEPS", "candidates", "form_conv", "describe", "reshape_input", "reshape_weights", "host_writes"]

_Step = tuple[Callable[[Conv2d], Conv2d | None], Callable[[Conv2d], str],
              Callable[[np.ndarray, Conv2d], np.ndarray], Callable[[np.ndarray, Conv2d], np.ndarray], str]
#: Per step: ``(conv, words, input, weights, host work kind)``.
STEPS: dict[str, _Step] = {
    "s2d": (s2d_conv, s2d_form, s2d_input, s2d_weights, "space_to_depth"),
    "stack": (stack_conv, stack_form, stack_input, stack_weights, "row_stack"),
    "im2col": (im2col_conv, im2col_form, im2col_input, im2col_weights, "im2col"),
}


def candidates(conv: Conv2d, rows: int) -> list[tuple[tuple[str, ...], Conv2d]]:
    """``(steps, the conv they give)`` of every form of ``conv`` worth scoring on ``rows`` rows,
    ``((), conv)`` first (kept per conv and rows: a sweep asks once per array group)."""
    key = (conv, rows)
    out = _CANDIDATES.get(key)
    if out is None:
        if len(_CANDIDATES) >= 1 << 14:
            _CANDIDATES.clear()
        out = [((), conv)]
        for step in ("s2d", "stack"):
            for steps, base in list(out):
                if step in steps or (steps and step == "s2d"):  # space-to-depth comes first, once
                    continue
                new = STEPS[step][0](base)
                if new is not None and new.c_in <= rows:
                    out.append((steps + (step,), new))
        _CANDIDATES[key] = out
    return list(out)


_CANDIDATES: dict[tuple[Conv2d, int], list[tuple[tuple[str, ...], Conv2d]]] = {}


def _walk(conv: Conv2d, steps: tuple[str, ...]) -> Iterator[tuple[_Step, Conv2d, Conv2d]]:
    """Per step: ``(its functions, the conv before it, the conv after it)``."""
    for step in steps:
        new = STEPS[step][0](conv)
        if new is None:
            raise ValueError(f"conv {conv.name or conv} has no {step} form")
        yield STEPS[step], conv, new
        conv = new


def form_conv(conv: Conv2d, steps: tuple[str, ...]) -> Conv2d:
    """The conv ``steps`` turn ``conv`` into."""
    out = conv
    for _, _, after in _walk(conv, steps):
        out = after
    return out


def describe(conv: Conv2d, steps: tuple[str, ...]) -> str:
    """``steps`` on ``conv`` in words (``""`` for none)."""
    return ", then ".join(fns[1](before) for fns, before, _ in _walk(conv, steps))


def reshape_input(x: np.ndarray, conv: Conv2d, steps: tuple[str, ...]) -> np.ndarray:
    """The host's reshape of ``conv``'s NHWC input ``x`` for the form ``steps``."""
    for fns, before, _ in _walk(conv, steps):
        x = fns[2](x, before)
    return x


def reshape_weights(w: np.ndarray, conv: Conv2d, steps: tuple[str, ...]) -> np.ndarray:
    """``conv``'s HWIO weights ``w`` for the form ``steps``."""
    for fns, before, _ in _walk(conv, steps):
        w = fns[3](np.asarray(w), before)
    return w


def host_writes(conv: Conv2d, steps: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """Per step, ``(host work kind, elements the host writes)``: the reshaped input's elements
    (space-to-depth moves each once, zeros completing the last block included; row stacking writes
    each input row once per kernel row that reads it, the vertical pads as zeros)."""
    return tuple((fns[4], after.n * after.h * after.w * after.c_in) for fns, _, after in _walk(conv, steps))

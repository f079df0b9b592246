"""The work a workload leaves beside its matrix and vector ops, sorted by what it costs (stdlib only).

Readers count every primitive they do not lower (``Workload.other_primitives``, with the elements
each writes in ``Workload.other_elements`` where known). Most are no arithmetic at all:

* **data layout**: primitives that only move, copy, reshape or re-type elements (reshape,
  transpose, broadcast, concatenate, slice, gather, a dtype conversion, ...). On the accelerator
  they are addresses: the DMA's strides and the compiler's buffer layout, no datapath. They are
  named as free.
* **scalar index arithmetic**: an arithmetic primitive that writes one element per run (a
  position or an index, as ``x[i]`` with a traced ``i`` computes): the host's control, not data.
  Named as free too.
* **host arithmetic**: everything else, element-wise or reduction work on tensors that no unit
  of the design runs. The model leaves it out of its figures and says so, never silently.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LAYOUT_PRIMITIVES", "HostWork", "host_work"]

#: Primitives (JAX's, ONNX's and StableHLO's names) that only move or re-type elements.
LAYOUT_PRIMITIVES = frozenset({
    # jaxpr primitives
    "reshape", "transpose", "broadcast_in_dim", "convert_element_type", "concatenate", "slice", "split",
    "squeeze", "expand_dims", "gather", "dynamic_slice", "dynamic_update_slice", "pad", "copy", "copy_p",
    "rev", "iota", "bitcast_convert_type", "reduce_precision", "stack",
    # ONNX op types
    "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Slice", "Split", "Gather",
    "Identity", "Cast", "Constant", "Shape", "Expand", "Pad", "Tile",
    # StableHLO op names (the reader drops their "stablehlo." prefix) not named above
    "convert", "constant",
})


@dataclass(frozen=True)
class HostWork:
    """``(name, runs, elements or None)`` triples, in the workload's order, by class."""

    arithmetic: tuple[tuple[str, int, int | None], ...]
    layout: tuple[tuple[str, int, int | None], ...]
    scalar: tuple[tuple[str, int, int | None], ...]


def host_work(other_primitives: tuple[tuple[str, int], ...], other_elements: tuple[tuple[str, int], ...]) -> HostWork:
    """Sort a workload's other primitives into host arithmetic, data layout and scalar index arithmetic."""
    elements = dict(other_elements)
    parts: dict[str, list[tuple[str, int, int | None]]] = {"arithmetic": [], "layout": [], "scalar": []}
    for name, runs in other_primitives:
        written = elements.get(name)
        base = name.split("[")[0]  # "dot_general[empty]": a zero-size op is no work either
        if base in LAYOUT_PRIMITIVES or name.endswith("[empty]"):
            part = "layout"
        elif written is not None and written <= runs:
            part = "scalar"
        else:
            part = "arithmetic"
        parts[part].append((name, runs, written))
    return HostWork(**{k: tuple(v) for k, v in parts.items()})

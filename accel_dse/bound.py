"""What bounds a design on a workload, from the figures the model already has (no new model).

The model's cycles split into three parts that add up to the total: ``compute_cycles`` (the array
works through its folds), ``vector_cycles`` (the vector unit's work, after the matrix ops) and
``stall_cycles`` (the array waits for DRAM: the total minus the other two; in the one program's
walk, ``perf_model.figures.one_program``, exactly that). :func:`bound_by` names the largest part
as the design's limit: ``array`` (compute), ``DRAM bandwidth`` (stalls) or ``vector unit``; per op
(the ops' own plans) the same between compute and stall. While it computes, the array may still be
poorly used (a decode step's ``M = 1`` fills one row of PEs): ``array_busy`` is the share of the
PEs' MAC slots used in the compute cycles. Work the host does (vector ops the unit cannot run,
host arithmetic) is not in the model's cycles: it is counted and named, never given a share
it does not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bound_by", "LIMITS"]

#: The cycle part -> the name of what limits a design where that part is the largest.
LIMITS = {"compute": "array", "dram_stall": "DRAM bandwidth", "vector": "vector unit"}


def _shares(compute: float, stall: float, vector: float) -> dict[str, float]:
    total = compute + stall + vector
    if total <= 0:
        return dict.fromkeys(LIMITS, 0.0)
    return {"compute": compute / total, "dram_stall": stall / total, "vector": vector / total}


def _limit(shares: Mapping[str, float]) -> str:
    return LIMITS[max(LIMITS, key=lambda k: shares[k])]


def bound_by(total: Mapping[str, Any], ops: Sequence[Any], peak_macs_per_cycle: int,
             host_vector_ops: Sequence[Mapping[str, Any]] = (), host_arithmetic: int = 0) -> dict[str, Any]:
    """What limits a design: cycle shares in total and per op, and the largest.

    Args:
        total: the model's totals (``WorkloadResult.total``): ``compute_cycles``, ``stall_cycles``,
            ``vector_cycles``, ``macs``.
        ops: the per-op results (``OpResult``: ``name``, ``status``, ``compute_cycles``,
            ``stall_cycles``).
        peak_macs_per_cycle: the array's PEs (``rows * cols``).
        host_vector_ops: the vector ops the design leaves to the host (``WorkloadResult.host_work``).
        host_arithmetic: host arithmetic primitives of the workload beside them (count).

    Returns:
        ``limit`` (``"array"``, ``"DRAM bandwidth"`` or ``"vector unit"``), ``shares`` (fractions
        of the total cycles: ``compute``, ``dram_stall``, ``vector``), ``array_busy`` (MACs over
        the PEs' MAC slots in the compute cycles, a fraction), ``host`` (``vector_ops``,
        ``elements``, ``arithmetic``: work left out of the cycles), ``ops`` (per op: ``name``,
        ``shares``, ``limit``) and ``line`` (one sentence).
    """
    compute = float(total.get("compute_cycles", 0))
    stall = float(total.get("stall_cycles", 0))
    vector = float(total.get("vector_cycles", 0))
    shares = _shares(compute, stall, vector)
    slots = compute * peak_macs_per_cycle
    busy = float(total.get("macs", 0)) / slots if slots > 0 else 0.0
    per_op = []
    for op in ops:
        if op.status != "ok":
            continue
        s = _shares(float(op.compute_cycles), float(op.stall_cycles), 0.0)
        per_op.append({"name": op.name, "shares": s, "limit": _limit(s)})
    elements = sum(int(h.get("elements", 0)) for h in host_vector_ops)
    host = {"vector_ops": len(host_vector_ops), "elements": elements, "arithmetic": int(host_arithmetic)}
    limit = _limit(shares)
    line = (f"bound by: {limit}: {100 * shares['dram_stall']:.1f} % of cycles DRAM stall, "
            f"{100 * shares['compute']:.1f} % compute (the PEs {100 * busy:.1f} % busy while computing), "
            f"{100 * shares['vector']:.1f} % vector unit")
    if host["vector_ops"] or host["arithmetic"]:
        what = []
        if host["vector_ops"]:
            what.append(f"{host['vector_ops']} vector op{'s' if host['vector_ops'] != 1 else ''}")
        if host["arithmetic"]:
            what.append(f"{host['arithmetic']} arithmetic primitive{'s' if host['arithmetic'] != 1 else ''}")
        line += f"; plus host work not in these cycles ({', '.join(what)}), which may bound it instead"
    return {"limit": limit, "shares": shares, "array_busy": busy, "host": host, "ops": per_op, "line": line}

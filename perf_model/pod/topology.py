"""Where the groups of a split sit on a pod's axes (pure functions).

A system's axes, innermost first: each axis of the ring or torus (``dims``; closed when
``wraparound``), or the one axis of a ``switch``; then, with ``pods > 1``, the data-centre
network (DCN) as one more switch-like axis of ``pods`` members, each chip with its own DCN
bandwidth.

Placement: the split's groups are laid out innermost first in the order tensor, expert, the
rest of data, pipeline (``tp``, ``ep``, ``dp / ep``, ``pp``), each filling the axes from where
the previous one stopped. A group of ``g`` chips either fits in what is left of the current axis
(the left part ``r`` is a multiple of ``g``: the group is ``g`` chips ``s`` apart, ``s`` the
product of the groups before it on that axis) or takes all of it and goes on to the next axis
(``g`` a multiple of ``r``). Anything else does not fit the topology. A group's piece of an axis
is a :class:`Segment`: its members ``n``, the bandwidth one member has towards the next in one
direction (a link axis: the link bandwidth over ``s``, since the ``s`` interleaved groups share
the links they cross; a switch or the DCN: each chip's own), and whether it closes into a ring
(it spans the whole axis and the axis wraps around).
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_spec.pod_config import SystemConfig

__all__ = ["Axis", "Segment", "system_axes", "place", "merge_axes", "GROUP_ORDER"]

#: The order in which a split's groups are placed, innermost first.
GROUP_ORDER = ("tp", "ep", "dp", "pp")


@dataclass(frozen=True)
class Axis:
    """One axis of a system: ``size`` members, ``bw`` bytes/s one way per link (or per chip for a
    switch or the DCN), ``latency_s`` per hop, ``wrap`` (a ring), ``switch`` (a crossbar), ``dcn``."""

    size: int
    bw: float
    latency_s: float
    wrap: bool
    switch: bool
    dcn: bool = False


@dataclass(frozen=True)
class Segment:
    """A group's piece of one axis: ``n`` members, ``bw`` bytes/s one way per member, ``ring``
    (closed), ``switch`` (through a crossbar or the DCN), ``latency_s`` per hop, ``dcn``."""

    n: int
    bw: float
    latency_s: float
    ring: bool
    switch: bool
    dcn: bool = False
    axis: int = -1


def merge_axes(segments: list[Segment]) -> list[Segment]:
    """Pieces of one group on the same axis as one piece (a group made of two placed groups,
    ``ep`` and ``dp / ep``): their members multiply, the inner piece's bandwidth (the smaller
    stride) holds, and it is a ring when the outer piece closes one."""
    out: list[Segment] = []
    for seg in segments:
        if out and seg.axis >= 0 and out[-1].axis == seg.axis:
            prev = out.pop()
            seg = Segment(prev.n * seg.n, max(prev.bw, seg.bw), seg.latency_s, prev.ring or seg.ring, seg.switch,
                          seg.dcn, seg.axis)
        out.append(seg)
    return out


def system_axes(system: SystemConfig) -> list[Axis]:
    """The system's axes, innermost first (see the module docstring)."""
    link = system.link_gb_per_s * 1e9
    lat = system.link_latency_us * 1e-6
    if system.topology == "switch":
        axes = [Axis(system.dims[0], link, lat, False, True)]
    else:
        axes = [Axis(d, link, lat, system.wraparound, False) for d in system.dims]
    if system.pods > 1:
        axes.append(Axis(system.pods, system.dcn_gb_per_s * 1e9, system.dcn_latency_us * 1e-6, False, True, True))
    return axes


def place(sizes: dict[str, int], axes: list[Axis]) -> dict[str, list[Segment]] | str:
    """Each group's segments, or the reason (a string) the groups do not fit the axes.

    Args:
        sizes: group name -> chips in one group, placed in the order of :data:`GROUP_ORDER`
            (names not in it after those, in the dict's order); the product must be the chips.
        axes: from :func:`system_axes`.
    """
    order = [g for g in GROUP_ORDER if g in sizes] + [g for g in sizes if g not in GROUP_ORDER]
    out: dict[str, list[Segment]] = {}
    a, stride = 0, 1
    for name in order:
        g = sizes[name]
        segs: list[Segment] = []
        while g > 1:
            if a >= len(axes):
                return f"the split's {name} group needs more chips than the system has"
            axis = axes[a]
            left = axis.size // stride
            if left == 1:
                a, stride = a + 1, 1
                continue
            share = 1 if axis.switch else stride
            if g % left == 0:
                segs.append(Segment(left, axis.bw / share, axis.latency_s, axis.wrap, axis.switch, axis.dcn, a))
                g //= left
                a, stride = a + 1, 1
            elif left % g == 0:
                segs.append(Segment(g, axis.bw / share, axis.latency_s, False, axis.switch, axis.dcn, a))
                stride *= g
                g = 1
            else:
                return (f"the split's {name} group of {sizes[name]} does not tile the topology: {left} chips are "
                        f"left on axis {a} (size {axis.size}), and neither divides the other")
        out[name] = segs
    return out

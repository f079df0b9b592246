"""On-chip reuse across layers: the programs of a chain of GEMMs whose outputs stay on chip.

A chain is a sequence of requantised GEMMs where each one's ``A`` is the previous one's
output (``workloads.chain_link``: ``m`` equal, ``k`` = the previous ``n``). Link ``i`` (op ``i``
to op ``i + 1``) is kept on chip when the design can move an output into its ifmap
(:func:`perf_model.compiler.program.reuse_possible`: WS with ``R == C``, or IS) and the next ``A``,
``S_i`` ifmap words (:func:`region_words`), takes at most half of the ifmap (``D``). Its region alternates
between the top (``[D - S_i, D)``, the first link of a run of on-chip links) and the bottom
(``[0, S_i)``) of the ifmap, so an op reading its ``A`` from one region writes the next into
the other. Op ``i`` then:

* moves its output into the region of link ``i`` instead of storing it (``c_region``);
* reads its ``A`` in place from the region of link ``i - 1`` (``a_region``), loading no A tile;
* otherwise (the first op of a run) tiles ``A`` in the ifmap words below the region.

Only the last op of a run of on-chip links stores to DRAM, and only the first loads ``A``.
The RTL runs each op's program as usual, one after the other without a reset (the ifmap keeps
the region); each program's total cycles are the walk's (``program_timing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model import timing
from perf_model.compiler.plan import plan_tiles
from perf_model.compiler.program import QUEUE_DEPTH, GemmProgram, _buffer_depths, compile_gemm, reuse_possible
from perf_model.evaluator import reuse_links
from workloads.ops import Gemm

__all__ = ["ChainPlan", "compile_chain", "region_words"]


def region_words(config: ArrayConfig, gemm: Gemm) -> int:
    """Ifmap words ``gemm``'s output takes as the next layer's ``A`` (the model's
    :func:`perf_model.evaluator.reuse_links.region_words`)."""
    return int(reuse_links.region_words(timing.dataflow_code(config.dataflow.value), config.rows, config.cols, gemm.m,
                                   gemm.n))


@dataclass(frozen=True)
class ChainPlan:
    """Where each link of a chain keeps its tensor.

    Attributes:
        regions: per link ``i`` (op ``i`` -> ``i + 1``), the ifmap word where op ``i + 1``'s ``A``
            starts, or ``None`` when the link goes through DRAM.
    """

    regions: tuple[int | None, ...]

    def a_region(self, i: int) -> int | None:
        """Where op ``i``'s ``A`` is on chip (``None``: loaded from DRAM)."""
        return self.regions[i - 1] if i > 0 else None

    def c_region(self, i: int) -> int | None:
        """Where op ``i``'s output goes on chip (``None``: stored to DRAM)."""
        return self.regions[i] if i < len(self.regions) else None


def _check(gemms: Sequence[Gemm], requants: Sequence[bool]) -> None:
    if len(gemms) != len(requants):
        raise ModelError(f"a chain needs one requant flag per GEMM: {len(gemms)} GEMMs, {len(requants)} flags")
    for i in range(len(gemms) - 1):
        a, b = gemms[i], gemms[i + 1]
        if (b.m, b.k) != (a.m, a.n):
            raise ModelError(f"GEMMs {i} and {i + 1} do not chain: the next needs m = {a.m} and k = {a.n}, "
                             f"not m = {b.m}, k = {b.k}")


def compile_chain(config: ArrayConfig, gemms: Sequence[Gemm], requants: Sequence[bool], *, reuse: bool = True,
                  queue_depth: int = QUEUE_DEPTH) -> tuple[ChainPlan, tuple[GemmProgram, ...]]:
    """The plan and one program per GEMM of the chain (module docstring); every link through
    DRAM without ``reuse``.

    A link is kept on chip when the design can move, the producer is requantised, its region
    takes at most half the ifmap and the producer can be tiled beside it as the first op of a
    run would be (``perf_model.evaluator.reuse_links``: the model's rule, so both keep the same links).

    Raises:
        ModelError: ``gemms`` and ``requants`` differ in length, two neighbours do not chain,
            or as :func:`perf_model.compiler.program.compile_gemm`.
    """
    _check(gemms, requants)
    depth = _buffer_depths(config)[0]
    regions: list[int | None] = []
    programs: list[GemmProgram] = []
    for i, gemm in enumerate(gemms):
        a_region = regions[-1] if regions else None
        program = None
        if i + 1 < len(gemms) and reuse and reuse_possible(config) and requants[i]:
            size = region_words(config, gemm)
            if 2 * size <= depth and plan_tiles(config, gemm, ifmap_reserve=size).feasible:
                c_region = 0 if a_region is not None and a_region != 0 else depth - size
                # the first op of a run tiles its A below the region; a later one reads it in place
                program = compile_gemm(config, gemm, requant=True, queue_depth=queue_depth, a_region=a_region,
                                       c_region=c_region, ifmap_words=c_region if a_region is None else None)
                regions.append(c_region)
        if program is None:
            program = compile_gemm(config, gemm, requant=requants[i], queue_depth=queue_depth, a_region=a_region)
            if i + 1 < len(gemms):
                regions.append(None)
        programs.append(program)
    return ChainPlan(tuple(regions)), tuple(programs)

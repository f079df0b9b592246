"""The files the DRAM-path driver and testbench exchange (numpy and stdlib only).

``dram_program.npz``: ``meta`` (JSON) and one DRAM image per GEMM instance (``img_<op>_<i>``,
uint8, the program and its tensors as :mod:`accel_dse.simulate.dram.image` lays them out).
``meta``: ``data_bytes`` (AXI width), ``clock_period_ns``, ``regs`` (register name -> byte
offset), ``results_dir`` and ``ops``: per op ``name``, ``a_src`` (-1, or the op whose
requantised output is this op's A: a chained network) and ``instances``: per instance
``chunks`` (``[queue base, commands]`` per queue-load), ``limit`` (cycles to wait for each
interrupt) and the layouts ``a`` and ``c`` (``TensorLayout`` fields); optional ``image`` (the image's
key, default ``img_<op>_<i>``), ``poke`` and ``read_c`` (default true: write the image before it,
read C after it; a sampled check's windows share one image, :mod:`accel_dse.simulate.dram.sampled_check`),
``poke_ranges``/``peek_ranges`` (byte ranges: write only these of the image, read only these of C).
The testbench writes
``results/op_NNNN.npz`` per op (renamed into place when complete): per instance ``c_<i>``
(the C bytes read back from DRAM) and arrays ``total``, ``compute``, ``stall``,
``error_code``, ``error_pc``, plus ``seconds``, ``sim_cycles``, ``error`` and ``starts`` (per
instance and queue-load, the run's cycle at which its ``CTRL.START`` write began: where a mismatch's
waves window is placed, :mod:`accel_dse.simulate.mismatch_store`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

__all__ = ["DramProgram", "DramResult", "write_dram_program", "read_dram_program", "write_dram_result",
           "dram_result_path",
           "read_dram_result", "layout_dict", "layout_of"]


def layout_dict(layout: Any) -> dict[str, Any]:
    """A ``TensorLayout`` as plain JSON data."""
    return {"name": layout.name, "base": layout.base, "rows": layout.rows, "row_elems": layout.row_elems,
            "elem_bytes": layout.elem_bytes, "transposed": layout.transposed, "shape": list(layout.shape),
            **({"packed": True} if getattr(layout, "packed", False) else {})}


def layout_of(data: dict[str, Any]) -> SimpleNamespace:
    """The object :mod:`~accel_dse.simulate.dram.image` takes, from :func:`layout_dict` data."""
    ns = SimpleNamespace(**{"packed": False, **data, "shape": tuple(data["shape"])})
    ns.elem_size = Fraction(ns.elem_bytes, 2 if ns.packed else 1)
    ns.pitch = int(ns.row_elems * ns.elem_size)
    ns.nbytes = ns.rows * ns.pitch
    return ns


@dataclasses.dataclass(frozen=True)
class DramProgram:
    """What the DRAM testbench runs (see the module docstring)."""

    meta: dict[str, Any]
    images: dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class DramResult:
    """What the testbench saw for one op (see the module docstring)."""

    c: list[np.ndarray]
    total: np.ndarray
    compute: np.ndarray
    stall: np.ndarray
    error_code: np.ndarray
    error_pc: np.ndarray
    seconds: float
    sim_cycles: int
    error: str = ""
    sdc_count: np.ndarray | None = None  # SDC_COUNT after each instance's programs (summed over queue-loads)
    sdc_pc: np.ndarray | None = None  # SDC_PC of its last mismatch (0: none)
    starts: np.ndarray | None = None  # (instance, queue-load): the run's cycle its CTRL.START write began (-1: none)


def write_dram_program(path: Path, program: DramProgram) -> None:
    """Write ``program`` to ``path`` (``.npz``)."""
    arrays: dict[str, Any] = dict(program.images)
    np.savez(path, meta=np.array(json.dumps(program.meta)), **arrays)


def read_dram_program(path: Path) -> DramProgram:
    """Read what :func:`write_dram_program` wrote."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        return DramProgram(meta, {k: data[k] for k in data.files if k != "meta"})


def dram_result_path(results_dir: Path, op: int) -> Path:
    """Where the testbench writes op ``op``'s result (it appears when the op has finished)."""
    return _result_path(results_dir, op)


def _result_path(results_dir: Path, op: int) -> Path:
    return Path(results_dir) / f"op_{op:04d}.npz"


def write_dram_result(results_dir: Path, op: int, result: DramResult) -> None:
    """Write one op's result atomically."""
    final = _result_path(results_dir, op)
    tmp = final.with_name(final.stem + ".tmp.npz")
    arrays: dict[str, Any] = {f"c_{i}": c for i, c in enumerate(result.c)}
    np.savez(tmp, total=result.total, compute=result.compute, stall=result.stall, error_code=result.error_code,
             error_pc=result.error_pc, seconds=np.float64(result.seconds), sim_cycles=np.int64(result.sim_cycles),
             error=np.array(result.error), sdc_count=np.zeros(0) if result.sdc_count is None else result.sdc_count,
             sdc_pc=np.zeros(0) if result.sdc_pc is None else result.sdc_pc,
             starts=np.zeros((0, 0), np.int64) if result.starts is None else result.starts, **arrays)
    os.replace(tmp, final)


def read_dram_result(results_dir: Path, op: int) -> DramResult | None:
    """The result of op ``op``, or None if the testbench did not finish it."""
    path = _result_path(results_dir, op)
    if not path.is_file():
        return None
    with np.load(path) as data:
        count = sum(1 for k in data.files if k.startswith("c_"))
        return DramResult([data[f"c_{i}"] for i in range(count)], data["total"], data["compute"], data["stall"],
                          data["error_code"], data["error_pc"], float(data["seconds"]), int(data["sim_cycles"]),
                          str(data["error"]), data["sdc_count"], data["sdc_pc"],
                          data["starts"] if "starts" in data.files else None)

"""The files the driver and the testbench exchange (numpy only; read inside the simulator).

The driver writes one *program* per simulation (``program.npz``): the host-port description,
a table with one row per run (start pulse) of every op, and the buffer words to load, already
laid out as the accelerator's buffers hold them (one row of bytes per word, little-endian
lanes). The testbench executes it and writes one result file per op as soon as the op is done
(``results/op_NNNN.npz``, renamed into place), so a simulation killed by a timeout still leaves
the results of the ops it finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "RUN_FIELDS",
    "Program",
    "OpRaw",
    "write_program",
    "read_program",
    "write_op_result",
    "read_op_result",
    "op_result_path",
]

#: Columns of the run table, one row per ``start`` pulse.
#: ``op``: op index; ``m``/``k``/``n``/``accumulate``: the GEMM registers of the run;
#: ``if_off``/``if_cnt``: slice of ``ifmap_words`` to load at word address 0 (likewise ``w_``);
#: ``read_cnt``: ofmap words to read back after the run (0: keep accumulating);
#: ``limit``: cycles to wait for ``done`` before giving up on the op;
#: ``a_src``: -1, or the op whose requantised output is this run's input matrix (a chained
#: network): then ``if_cnt`` words are packed in the simulator from rows ``m0:m1``, columns
#: ``k0:k1`` of that output (``if_off`` unused); ``m0``..``n1``: the run's tile of its op's GEMM;
#: ``qp_off``/``qp_cnt``: slice of ``qparam_words`` to load before the read (requantised ops);
#: ``q_div``/``q_mod``: 0 for a raw read, else ofmap word ``i`` is read through the output stage
#: with ``host_qsel = (i // q_div) % q_mod``.
RUN_FIELDS: tuple[str, ...] = (
    "op", "m", "k", "n", "accumulate", "if_off", "if_cnt", "w_off", "w_cnt", "read_cnt", "limit",
    "a_src", "m0", "m1", "k0", "k1", "n0", "n1", "qp_off", "qp_cnt", "q_div", "q_mod",
)


@dataclasses.dataclass(frozen=True)
class Program:
    """What the testbench runs.

    Attributes:
        port: Host-port description: ``names`` (logical -> HDL port name), ``select`` (buffer ->
            select code), ``read_latency`` and ``qdata_latency`` (cycles), ``clock_period_ns``,
            ``ofmap_word_bytes``, ``qdata_word_bytes``, ``reset_cycles``, ``design`` (the
            ``ArrayConfig`` as a dict, to lay out chained inputs).
        op_names: Name of each op, by op index.
        runs: int64 table, one row per run, columns :data:`RUN_FIELDS`.
        ifmap_words: uint8 ``(words, bytes_per_word)``: input-buffer words of all runs, concatenated.
        weight_words: uint8 ``(words, bytes_per_word)``: weight-buffer words, concatenated.
        results_dir: Where the testbench writes ``op_NNNN.npz``.
        qparam_words: uint8 ``(words, bytes_per_word)``: output-stage parameter words, concatenated.
    """

    port: dict[str, Any]
    op_names: tuple[str, ...]
    runs: np.ndarray
    ifmap_words: np.ndarray
    weight_words: np.ndarray
    results_dir: str
    qparam_words: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 1), np.uint8))

    def column(self, name: str) -> np.ndarray:
        """One column of :attr:`runs` by its :data:`RUN_FIELDS` name."""
        return self.runs[:, RUN_FIELDS.index(name)]


@dataclasses.dataclass(frozen=True)
class OpRaw:
    """What the testbench saw for one op.

    Attributes:
        cycles: The ``cycles`` register after each run (int64, one per run; -1 if not read).
        ofmap: uint8 ``(words, ofmap_word_bytes)``: all raw words read back, in run order.
        qdata: uint8 ``(words, qdata_word_bytes)``: the same words through the output stage
            (requantised ops; empty otherwise).
        seconds: Wall time spent on the op inside the simulator, s.
        sim_cycles: Clock cycles simulated for the op (loading and reading included).
        error: Empty, or why the op could not finish (``done`` never came, X on a port, ...).
    """

    cycles: np.ndarray
    ofmap: np.ndarray
    seconds: float
    sim_cycles: int
    error: str = ""
    qdata: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 1), np.uint8))


def write_program(path: Path, program: Program) -> None:
    """Write ``program`` to ``path`` (an ``.npz``)."""
    meta = {"port": program.port, "op_names": list(program.op_names), "results_dir": program.results_dir,
            "fields": list(RUN_FIELDS)}
    np.savez(path, meta=np.array(json.dumps(meta)), runs=program.runs.astype(np.int64),
             ifmap_words=program.ifmap_words, weight_words=program.weight_words, qparam_words=program.qparam_words)


def read_program(path: Path) -> Program:
    """Read a program written by :func:`write_program`."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        return Program(
            port=meta["port"], op_names=tuple(meta["op_names"]), runs=data["runs"],
            ifmap_words=data["ifmap_words"], weight_words=data["weight_words"], results_dir=meta["results_dir"],
            qparam_words=data["qparam_words"],
        )


def op_result_path(results_dir: Path, op_index: int) -> Path:
    """``results_dir/op_NNNN.npz``."""
    return Path(results_dir) / f"op_{op_index:04d}.npz"


def write_op_result(results_dir: Path, op_index: int, raw: OpRaw) -> None:
    """Write one op's result atomically (temporary file, then rename)."""
    final = op_result_path(results_dir, op_index)
    tmp = final.with_name(final.stem + ".tmp.npz")
    np.savez(tmp, cycles=raw.cycles.astype(np.int64), ofmap=raw.ofmap,
             seconds=np.float64(raw.seconds), sim_cycles=np.int64(raw.sim_cycles), error=np.array(raw.error),
             qdata=raw.qdata)
    os.replace(tmp, final)


def read_op_result(results_dir: Path, op_index: int) -> OpRaw | None:
    """The result of op ``op_index``, or None if the testbench did not finish it."""
    path = op_result_path(results_dir, op_index)
    if not path.is_file():
        return None
    with np.load(path) as data:
        return OpRaw(cycles=data["cycles"], ofmap=data["ofmap"], seconds=float(data["seconds"]),
                     sim_cycles=int(data["sim_cycles"]), error=str(data["error"]), qdata=data["qdata"])

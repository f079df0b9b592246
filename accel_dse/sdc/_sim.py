"""The campaign's simulator driver: trials on a cocotb + Verilator build of one design.

The design's flat Verilog with its fault targets public (:mod:`accel_dse.sdc._verilog`) is
built once through the project's build cache (``accel_dse.simulate.runner.build``: keyed by the
Verilog's hash, so a second campaign on the same design reuses it), and every trial runs in one
simulator process (:mod:`accel_dse.sdc._bench`, started by ``accel_dse.simulate.runner.launch``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from accel_dse.sdc.places import FaultSpec
from accel_dse.simulate.host.layout import pack_inputs, pack_qparams, qsel_rule, unpack_output, word_bytes
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import SimulationError
from perf_model import timing

__all__ = ["Trial", "Outcome", "simulate_trials", "TESTBENCH"]

#: The cocotb test module of the campaign.
TESTBENCH = "accel_dse.sdc._bench"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One trial: ``C = A @ B`` requantised with ``qparams`` (one ``(bias, multiplier, shift,
    zero_point, act_min, act_max)`` per output channel), with at most one ``fault``."""

    a: np.ndarray
    b: np.ndarray
    qparams: list[tuple[int, ...]]
    fault: FaultSpec | None = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a trial read back: the raw accumulators, the requantised outputs, and the flags of the
    run's checksum (``sdc``) and of the output stage's check (``qsdc``); both False unchecked."""

    raw: np.ndarray
    q: np.ndarray
    sdc: bool
    qsdc: bool

    @property
    def flagged(self) -> bool:
        """The design flagged the trial."""
        return self.sdc or self.qsdc


def _hex_words(rows: np.ndarray) -> list[str]:
    return [format(int.from_bytes(row.tobytes(), "little"), "x") for row in rows]


def _words(hex_words: list[str], lanes: int, bits: int) -> np.ndarray:
    size = word_bytes(lanes, bits)
    data = b"".join(max(int(w, 16), 0).to_bytes(size, "little") for w in hex_words)
    return np.frombuffer(data, np.uint8).reshape(len(hex_words), size)


def _struck(value: int, kind: str, bit: int) -> int:
    """``value`` with bit ``bit`` flipped (``flip``), cleared (``stuck0``) or set (``stuck1``)."""
    mask = 1 << bit
    return value ^ mask if kind == "flip" else value & ~mask if kind == "stuck0" else value | mask


def _lanes(config: ArrayConfig, buf: str) -> int:
    """Lanes of an ``ifmap`` or ``weight`` word (WS: R and C; IS: C and R)."""
    return config.rows if (buf == "ifmap") != (config.dataflow is Dataflow.IS) else config.cols


def _fault_spec(config: ArrayConfig, fault: FaultSpec, registers: dict[str, dict[str, int]],
                words: dict[str, list[str]], run: int, out_words: int, latency: int) -> dict[str, Any] | None:
    """The bench's description of ``fault`` (module :mod:`accel_dse.sdc._bench`), or None when it
    strikes nothing the export kept."""
    from accel_dse.sdc._verilog import pe_register_path

    ib, ab = config.input_bits, config.acc_bits
    if fault.place.startswith("pe_"):
        found = pe_register_path(registers, *fault.target)
        if found is None:
            return None
        path, width = found
        return {"how": "reg", "phase": "run", "path": path, "bit": fault.bit % width, "kind": fault.kind,
                "cycle": fault.cycle % run}
    if fault.place == "output_stage":
        names = sorted(registers["output_stage"])
        which = fault.target[0]
        name = which if isinstance(which, str) else names[which % len(names)]
        return {"how": "reg", "phase": "read", "path": f"output_stage.{name}",
                "bit": fault.bit % registers["output_stage"][name], "kind": fault.kind,
                "cycle": fault.cycle % (out_words + latency)}
    if fault.place == "operand_buffer":
        buf, lane, addr = fault.target
        lanes = _lanes(config, buf)
        addr %= len(words[buf])
        word = _struck(int(words[buf][addr], 16), fault.kind, (lane % lanes) * ib + fault.bit % ib)
        return {"how": "sram", "buffer": buf, "addr": addr, "word": format(word, "x"), "cycle": fault.cycle % run}
    if fault.place == "ofmap_buffer":
        _, lane, addr = fault.target
        return {"how": "ofmap", "addr": addr % out_words, "bit": (lane % config.cols) * ab + fault.bit % ab,
                "kind": fault.kind}
    return {"how": "dma"}  # applied to the words before they are written


def _dma(config: ArrayConfig, fault: FaultSpec, words: dict[str, list[str]]) -> None:
    """Strike the words of ``fault`` (``dma``) as they cross the DMA datapath: a flip in one word,
    a stuck bit in every word of that buffer."""
    buf, index = fault.target
    bit = fault.bit % (_lanes(config, buf) * config.input_bits)
    hit = range(len(words[buf])) if fault.kind != "flip" else [index % len(words[buf])]
    for i in hit:
        words[buf][i] = format(_struck(int(words[buf][i], 16), fault.kind, bit), "x")


def simulate_trials(config: ArrayConfig, trials: list[Trial], *, work_dir: Path | None = None,
                    timeout: float | None = 3600.0) -> list[Outcome]:
    """Run ``trials`` back to back on one Verilator simulation of ``config`` (built once, cached).

    Raises:
        SimulationError: an OS design, no Verilator, a failed build, or a run that never finished.
    """
    import rtl_gen
    from accel_dse.sdc._bench import OUTCOMES_ENV, TRIALS_ENV  # cocotb's module: its names, imported here
    from accel_dse.sdc._verilog import campaign_verilog
    from accel_dse.simulate.runner.build import build_design
    from accel_dse.simulate.runner.launch import run_testbench
    from accel_dse.simulate.runner.tools import find_simulator
    from rtl_gen.core.checksum import CHECK_LATENCY

    if config.dataflow is Dataflow.OS:
        raise SimulationError("the campaign runs WS and IS designs (the OS array has no checksum)")
    top = rtl_gen.top_name(config)
    verilog, registers = campaign_verilog(config, top)
    simulator = find_simulator("verilator")
    build = build_design(verilog, top=top, simulator=simulator, work_dir=work_dir)
    df = timing.dataflow_code(config.dataflow)
    latency = rtl_gen.QDATA_LATENCY
    widths = tuple(w for _, w in rtl_gen.param_fields(config.input_bits))
    specs = []
    for trial in trials:
        m, k = trial.a.shape
        n = trial.b.shape[1]
        ifmap, weight = pack_inputs(config, np.asarray(trial.a), np.asarray(trial.b))
        words = {"ifmap": _hex_words(ifmap), "weight": _hex_words(weight),
                 "qparam": _hex_words(pack_qparams(config, trial.qparams, widths))}
        run = int(timing.run_cycles(df, config.rows, config.cols, m, k, n, config.shadow_stationary))
        out_words = int(timing.run_words(df, config.rows, config.cols, m, k, n)[2])
        div, mod = qsel_rule(config, m, n)
        fault = None
        if trial.fault is not None:
            fault = _fault_spec(config, trial.fault, registers, words, run, out_words, latency)
            if trial.fault.place == "dma":
                _dma(config, trial.fault, words)
        specs.append({**words, "m": m, "k": k, "n": n, "run_cycles": run, "words": out_words,
                      "qsel": [(i // div) % mod for i in range(out_words)], "fault": fault})
    setup = {"checked": config.checksum != "none", "check_latency": CHECK_LATENCY, "qdata_latency": latency,
             "host_sel": dict(rtl_gen.HOST_SEL)}
    base = Path(work_dir) if work_dir is not None else build.directory.parent.parent
    base.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="sdc-", dir=base))  # kept when the simulation fails, for its log
    (run_dir / "trials.json").write_text(json.dumps({"setup": setup, "trials": specs}), "utf-8")
    outcome = run_testbench(build, test_module=TESTBENCH, run_dir=run_dir, timeout=timeout,
                            env={TRIALS_ENV: str(run_dir / "trials.json"),
                                 OUTCOMES_ENV: str(run_dir / "outcomes.jsonl")})
    path = run_dir / "outcomes.jsonl"
    lines = path.read_text("utf-8").splitlines() if path.is_file() else []
    if len(lines) != len(trials):
        raise SimulationError(f"the campaign's simulation of {top} ended after {len(lines)} of {len(trials)} "
                              f"trials (exit {outcome.returncode}); log: {run_dir / 'sim.log'}")
    shutil.rmtree(run_dir, ignore_errors=True)
    results = []
    for trial, line in zip(trials, lines, strict=True):
        got = json.loads(line)
        if "error" in got:
            raise SimulationError(f"campaign trial on {top}: {got['error']}")
        m, n = trial.a.shape[0], trial.b.shape[1]
        raw = unpack_output(config, _words(got["raw"], config.cols, config.acc_bits), m, n)
        q = unpack_output(config, _words(got["q"], config.cols, config.input_bits), m, n, bits=config.input_bits)
        results.append(Outcome(raw, q, bool(got["sdc"]), bool(got["qsdc"])))
    return results

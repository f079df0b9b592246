"""Multi-fidelity check of a study's best designs: RTL simulation, Yosys synthesis, FPGA place and route.

After a model-driven sweep, :func:`verify_top` takes the top-K feasible designs (the Pareto
set first for several objectives), simulates each on the workload with ``accel_dse.simulate``
(each op's M and batch scaled by ``scale``, as ``accel-dse simulate --scale``), synthesises it
with ``rtl_gen.synth_stats``, and records pass/fail, RTL vs model cycles and the synthesis
figures in the study (user attribute ``accel_dse.verify.<trial>``, see
:mod:`accel_dse.study_view`: Optuna does not let a finished trial's own attributes change).
With ``fpga`` it also places and routes each design (``accel-dse rtl fpga``'s flow, cached) and
records fits, Fmax and the resources used beside the resource model's prediction.

With ``share=True`` several verifiers (processes, machines) against one study split the top K:
each design is claimed once through the study's storage (:mod:`accel_dse.verify._claims`), a
claim is renewed while its design is checked and expires when its verifier dies, and each
verifier returns the designs it checked itself.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accel_dse.verify._claims import CLAIM_TTL_S, Claims
from accel_spec.errors import AccelDseError, ExportError

__all__ = ["VerifyResult", "verify_top", "DEFAULT_SCALE", "DEFAULT_SIMULATOR", "DEFAULT_TIMEOUT_S", "MODES"]

#: Default ``scale`` of the simulated ops (M and batch of each op times this, at least 1).
DEFAULT_SCALE = 0.01
#: Default simulator.
DEFAULT_SIMULATOR = "verilator"
#: Default seconds one design's simulation may run.
DEFAULT_TIMEOUT_S = 1800.0
#: How a design is simulated: ``"exhaustive"`` (every run of the ops, scaled by ``scale``) or
#: ``"sampled"`` (the full-scale sampled check, ``accel_dse.simulate``'s ``mode="sampled"``).
MODES = ("exhaustive", "sampled")


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The RTL check of one trial's design.

    Attributes:
        trial: Trial number.
        rank: Position in the ranking (0: best / first of the Pareto set).
        pareto: Whether the trial is in the Pareto set (several objectives) or the best one.
        config_hash: The design's hash; ``design``: its short name.
        passed: Every simulated op bit-exact with the RTL cycles equal to the model's.
        status: ``"pass"``, ``"fail"`` (data or cycles differ) or ``"error"`` (could not be run).
        simulator, workload, scale: How it was simulated.
        mode: ``"exhaustive"`` (every run of the scaled ops) or ``"sampled"`` (the full-scale
            sampled check: only ``runs_simulated`` of ``runs_total`` runs ran in RTL, the rest
            was fast-forwarded on the model's cycles; never an exhaustive verification).
        runs_simulated, runs_total: Runs simulated in RTL and runs of the ops checked.
        ops, ops_passed: Ops simulated and ops that passed.
        mismatches: Output elements that differ from JAX, over all ops.
        cycles_rtl, cycles_model: Sums over the simulated ops (``None`` if nothing ran).
        cycles_recorded: The ``total_cycles`` the study recorded for the trial on the workload (``None``:
            the study did not score it). It must be this model's program walk
            (``accel_dse.verify._figure``), and, when every run of the whole workload was simulated at
            full scale from DRAM, the RTL's ``CYCLES_TOTAL`` summed over its programs, or the trial
            fails. (The host-port path counts the array's cycles only, and the sampled check
            fast-forwards on the model's: neither measures the whole total.)
        synth: ``{"cells", "transistors"}`` of ``rtl_gen.synth_stats`` (``{"error": ...}`` if it failed).
        fpga: ``accel_dse.export.fpga_figures`` of the place and route (``{}``: not asked;
            ``{"family", "device", "error"}`` if the tools failed).
        reason: Why it failed ("" when it passed).
        seconds: Wall time of simulation and synthesis, s.
        run_dir: The simulation's run directory.
    """

    trial: int
    rank: int
    pareto: bool
    config_hash: str
    design: str
    passed: bool
    status: str
    simulator: str
    workload: str
    scale: float
    mode: str = "exhaustive"
    runs_simulated: int = 0
    runs_total: int = 0
    ops: int = 0
    ops_passed: int = 0
    mismatches: int = 0
    cycles_rtl: int | None = None
    cycles_model: int | None = None
    cycles_recorded: float | None = None
    synth: dict[str, Any] = dataclasses.field(default_factory=dict)
    fpga: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0
    run_dir: str = ""

    @property
    def cycles_match(self) -> bool:
        """Whether the RTL took exactly the model's cycles."""
        return self.cycles_rtl is not None and self.cycles_rtl == self.cycles_model

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the study records)."""
        out = dataclasses.asdict(self)
        out["cycles_match"] = self.cycles_match
        out["verified_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        return out


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExportError(f"{name} must be a positive integer, not {value!r}")
    return value


def verify_top(
    storage_url: str,
    study_name: str,
    k: int,
    *,
    workload_spec: str | None = None,
    scale: float = DEFAULT_SCALE,
    simulator: str = DEFAULT_SIMULATOR,
    max_ops: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    work_dir: str | Path | None = None,
    synth: bool = True,
    record: bool = True,
    progress: Callable[[str], None] | None = None,
    share: bool = False,
    claim_ttl_s: float = CLAIM_TTL_S,
    fpga: str | None = None,
    fpga_device: str | None = None,
    mode: str = "exhaustive",
    jobs: int = 1,
) -> list[VerifyResult]:
    """RTL-simulate and synthesise the ``k`` best designs of a study; record the results in it.

    Args:
        storage_url: The study's storage.
        study_name: The study.
        k: How many designs (Pareto set first, then the next non-dominated layers; one
            objective: the ``k`` best).
        workload_spec: Workload to simulate (default: the study's first workload).
        scale: In (0, 1]: each op's M and batch are multiplied by it (``simulate --scale``).
        simulator: ``"verilator"`` or ``"icarus"``.
        max_ops: Simulate only the first ``max_ops`` ops of the workload.
        timeout: Seconds one design's simulation may run.
        work_dir: Simulation builds and runs (default ``accel_dse.simulate.default_work_dir()``).
        synth: Also run ``rtl_gen.synth_stats``.
        record: Write each result into the study (``accel_dse.verify.<trial>``).
        progress: Called with one line per stage.
        share: Split the designs with other verifiers of the same study (needs ``record``).
        claim_ttl_s: With ``share``: seconds after which a dead verifier's claim is taken over.
        fpga: Also place and route each design on this FPGA family (``"ecp5"``; cached).
        fpga_device: Its device (default: the study's ``[fpga]`` device when it is of that
            family, else the family's default).
        mode: ``"exhaustive"`` (default) or ``"sampled"`` (full scale: ``scale`` must be 1);
            recorded with each result.
        jobs: Designs checked at once (each build and simulation is a process of its own; up
            to the machine's cores is useful).

    Returns:
        One result per design (with ``share``: per design this verifier checked), in ranking
        order. A design that fails is a result with
        ``passed = False``, not an exception.

    Raises:
        StorageError / ExportError: the study cannot be opened, ``k`` is not positive, no
            feasible trial, no workload.
        SimulationError: the simulator is missing or ``scale``/``max_ops`` are invalid.
        WorkloadError: an unknown or malformed workload (checked before anything is recorded).
        ConfigError: an unknown FPGA family or device (checked before anything runs).
    """
    from accel_dse.report import load_study
    from accel_dse.simulate import cache_budget_bytes, find_simulator

    say = progress or (lambda _line: None)
    _positive("--top", k)
    _positive("--jobs", jobs)
    if max_ops is not None:
        _positive("--max-ops", max_ops)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise ExportError(f"--scale must be a number in (0, 1], not {scale!r}")
    if mode not in MODES:
        raise ExportError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "sampled" and scale != 1:
        raise ExportError(f"the sampled check runs the ops at full scale: --scale must be 1 with it, not {scale!r}")
    find_simulator(simulator)
    cache_budget_bytes()  # $ACCEL_DSE_SIM_CACHE_MB: refused here, not once per design
    if share and not record:
        raise ExportError("--share needs the results recorded in the study (record=True)")
    if share and (isinstance(claim_ttl_s, bool) or not isinstance(claim_ttl_s, (int, float)) or not claim_ttl_s > 0):
        raise ExportError(f"claim_ttl_s must be a positive number of seconds, not {claim_ttl_s!r}")
    if workload_spec is not None:
        _resolve(workload_spec)  # an unknown workload is refused before anything is simulated or recorded
    view = load_study(storage_url, study_name, read_only=not record)
    if record:
        view.check_writable()  # before any design is simulated
    if fpga is not None:
        from accel_dse.export import resolve_fpga

        fpga_device = resolve_fpga(fpga, fpga_device, view.space.get("fpga"))
    workload = workload_spec or (view.workloads[0] if view.workloads else None)
    if workload is None:
        raise ExportError(f"study {study_name!r} records no workload: give --workload")
    _resolve(workload)
    layers = view.ranked_layers()
    chosen = [t for layer in layers for t in layer][:k]
    if not chosen:
        raise ExportError(f"study {study_name!r} has no feasible COMPLETE trial to verify")
    front = {t.number for t in layers[0]} if view.multi_objective else {chosen[0].number}
    claims = Claims(view.study._storage, study_name, ttl_s=float(claim_ttl_s)) if share else None
    results: list[VerifyResult] = []
    pending = collections.deque(enumerate(chosen))
    waiting: list[tuple[int, Any]] = []
    running: set[concurrent.futures.Future[VerifyResult]] = set()
    lock = threading.Lock()  # the study's storage and the claims, shared by the design threads
    # The first design this verifier takes builds alone; the others' builds wait for it, then reuse its
    # compiled modules through ccache (accel_dse.simulate.runner.build.build_hooks). Their Verilog is generated
    # meanwhile.
    first_built = threading.Event()
    leader: list[int] = []
    # A design is claimed only when one of the ``jobs`` slots is free to check it at once: its claim is
    # renewed from the moment it is taken. (Claiming the whole top K up front left the queued claims
    # unrenewed; they expired while earlier designs were checked, and another verifier checked them too.)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="accel-dse-verify") as pool:
        while pending or waiting or running:
            while pending and len(running) < jobs:
                rank, trial = pending.popleft()
                with lock:
                    claim = claims.take(trial.number) if claims is not None else None
                    if claims is not None and claim is None:
                        if not claims.finished(trial.number):
                            waiting.append((rank, trial))  # another verifier has it: done, or expired, later
                        continue
                if not leader:
                    leader.append(trial.number)
                running.add(pool.submit(
                    _checked, view, claims, claim, trial, rank, trial.number in front, tag=_tag(rank, trial, chosen),
                    say=say, lock=lock, first_built=first_built if jobs > 1 else None,
                    leads=leader[0] == trial.number, workload=workload, scale=scale, simulator=simulator,
                    max_ops=max_ops, mode=mode, timeout=timeout, work_dir=work_dir, synth=synth, record=record,
                    study_name=study_name, fpga=fpga, fpga_device=fpga_device))
            if running:
                finished, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    results.append(future.result())
                    left = len(chosen) - len(results)
                    if left:
                        say(f"{len(results)}/{len(chosen)} design(s) verified; {_time_left(results, left, jobs)}")
                continue
            if waiting and claims is not None:
                say(f"{len(waiting)} design(s) being verified elsewhere; waiting for them or for their claims to "
                    "expire")
                time.sleep(min(claims.ttl_s / 3, 10.0))
            pending, waiting = collections.deque(waiting), []
    results.sort(key=lambda r: r.rank)
    return results


def _tag(rank: int, trial: Any, chosen: list[Any]) -> str:
    """The prefix of a design's progress lines: its rank among the chosen and its trial number."""
    return f"[{rank + 1}/{len(chosen)}] trial {trial.number}"


def _time_left(results: list[VerifyResult], left: int, jobs: int) -> str:
    """The estimate of the time the ``left`` designs still take: the mean wall time of a design
    checked so far (its build included) for each, ``jobs`` at a time. (The wall time since the start
    over the designs finished would count the first design's parallel partners as lost time and,
    after the first result, nearly double the estimate.)"""
    per = sum(r.seconds for r in results) / len(results)
    return (f"about {per * left / min(jobs, left) / 60:.1f} min left for {left} more ({min(jobs, left)} at a "
            f"time, {per / 60:.1f} min a design so far)")


#: The simulator's lines a verification passes on: what it expects and each op finished.
_ETA_LINE = re.compile(r"cycles to simulate|^finished op|^build took")


def _checked(view: Any, claims: Claims | None, claim: int | None, trial: Any, rank: int, pareto: bool, tag: str,
             say: Callable[[str], None], *, record: bool, study_name: str, lock: threading.Lock | None = None,
             first_built: threading.Event | None = None, leads: bool = False, **how: Any) -> VerifyResult:
    """Verify one trial's design (renewing its claim meanwhile), record the result, mark the claim done.

    With ``first_built``: the design that ``leads`` sets it once its simulator build is done (or
    reused, or failed, or the check ended without one); any other design's build that is not in
    the cache waits for it."""
    try:
        return _ordered(view, claims, claim, trial, rank, pareto, tag, say, record=record, study_name=study_name,
                        lock=lock, first_built=first_built, leads=leads, **how)
    finally:
        if first_built is not None and leads:
            first_built.set()


def _ordered(view: Any, claims: Claims | None, claim: int | None, trial: Any, rank: int, pareto: bool, tag: str,
             say: Callable[[str], None], *, record: bool, study_name: str, lock: threading.Lock | None,
             first_built: threading.Event | None, leads: bool, **how: Any) -> VerifyResult:
    from accel_dse.report import trial_config
    from accel_dse.simulate.runner.build import build_hooks
    from accel_dse.verify._figure import figure_problem, recorded_figure

    guard: contextlib.AbstractContextManager[Any] = lock if lock is not None else contextlib.nullcontext()
    config = trial_config(trial, study=f"study {study_name!r}")
    what = "full-scale sampled check" if how["mode"] == "sampled" else f"exhaustive, scale {how['scale']:g}"
    say(f"{tag}: {config.short_name()} ({config.config_hash}) on {how['workload']}, {what}, {how['simulator']}")
    keep: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if claims is not None and claim is not None:
        keep = claims.keep_alive(claim)
    order: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if first_built is not None:
        def wait() -> None:
            if not first_built.is_set():
                say(f"{tag}: build waits for the first design's, to reuse its compiled modules")
                first_built.wait()

        order = build_hooks(lambda: None, first_built.set) if leads else build_hooks(wait, lambda: None)
    try:
        with keep, order:
            how["recorded"] = recorded_figure(trial, how["workload"])
            how["figure_problem"] = figure_problem(trial, config, how["workload"])
            result = _verify_one(config, trial.number, rank, pareto, **how,
                                 progress=lambda line: say(f"{tag}: {line}") if _ETA_LINE.search(line) else None)
            verdict = "PASS" if result.passed else f"RTL VERIFICATION FAILED ({result.status}): {result.reason}"
            say(f"{tag}: {verdict}")
            if record:
                with guard:
                    view.record_verification(trial.number, result.to_dict())
    except BaseException:
        if claims is not None and claim is not None:
            with guard:
                claims.release(claim)
        raise
    if claims is not None and claim is not None:
        with guard:
            claims.done(claim)
    return result


def _resolve(spec: str) -> None:
    """Trace workload ``spec`` (cached); ``WorkloadError`` if it is unknown or malformed."""
    import workloads

    workloads.resolve(spec)


def _verify_one(config: Any, number: int, rank: int, pareto: bool, *, workload: str, scale: float, simulator: str,
                max_ops: int | None, timeout: float | None, work_dir: str | Path | None, synth: bool,
                fpga: str | None, fpga_device: str | None, mode: str = "exhaustive",
                progress: Callable[[str], None] | None = None, recorded: float | None = None,
                figure_problem: str = "") -> VerifyResult:
    from accel_dse.simulate import simulate

    start = time.perf_counter()
    base = {"trial": number, "rank": rank, "pareto": pareto, "config_hash": config.config_hash,
            "design": config.short_name(), "simulator": simulator, "workload": workload, "scale": float(scale),
            "mode": mode, "cycles_recorded": recorded}
    if figure_problem:  # the recorded figure is not this model's walk: nothing to simulate it against
        return VerifyResult(**base, passed=False, status="fail", reason=figure_problem,
                            seconds=round(time.perf_counter() - start, 3))
    try:
        report = simulate(config, workload, scale=scale, simulator=simulator, max_ops=max_ops, timeout=timeout,
                          work_dir=work_dir, progress=progress, mode=mode)
    except AccelDseError as exc:
        fields: dict[str, Any] = {"passed": False, "status": "error", "reason": f"simulation could not run: {exc}"}
    else:
        totals = report.totals()
        bad = [op for op in report.ops if op.status != "pass"]
        reason = "; ".join(f"{op.name}: {op.status}: {op.reason}" for op in bad[:3])
        if len(bad) > 3:
            reason += f"; and {len(bad) - 3} more op(s)"
        ran = any(op.cycles_rtl is not None for op in report.ops)
        fields = {
            "passed": report.passed,
            "status": "pass" if report.passed else ("fail" if any(op.status == "fail" for op in bad) else "error"),
            "ops": totals["ops"], "ops_passed": totals["pass"], "mismatches": totals["mismatches"],
            "cycles_rtl": totals["cycles_rtl"] if ran else None, "cycles_model": totals["cycles_model"],
            "reason": reason, "run_dir": report.run_dir,
            "runs_simulated": totals["runs_simulated"], "runs_total": totals["runs_total"],
        }
        # the whole program from DRAM, every run simulated: its CYCLES_TOTAL is the figure itself
        whole = (mode == "exhaustive" and scale == 1 and max_ops is None and recorded is not None and ran
                 and all(op.cycles_total_rtl is not None for op in report.ops))
        if whole and fields["passed"] and totals["cycles_total_rtl"] != recorded:
            fields |= {"passed": False, "status": "fail",
                       "reason": f"the RTL's total {totals['cycles_total_rtl']:,} cycles is not the figure the "
                                 f"study recorded, {recorded:,.0f}"}
    figures: dict[str, Any] = {}
    if synth:
        import rtl_gen

        try:
            stats = rtl_gen.synth_stats(config)
            figures = {"cells": stats["total"]["cells"], "transistors": stats["total"]["transistors"]}
        except AccelDseError as exc:
            figures = {"error": str(exc)}
    placed: dict[str, Any] = {}
    if fpga is not None:
        from accel_dse.export import fpga_document, fpga_figures

        try:
            placed = fpga_figures(fpga_document(config, fpga, fpga_device))
        except AccelDseError as exc:
            placed = {"family": fpga, "device": fpga_device, "error": str(exc)}
    return VerifyResult(**base, **fields, synth=figures, fpga=placed, seconds=round(time.perf_counter() - start, 3))

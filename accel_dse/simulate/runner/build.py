"""The build cache: one simulator build per design, keyed by the Verilog's hash.

A build lives in ``<work_dir>/builds/<top>-<simulator>-<key>/`` where ``key`` hashes the
Verilog text, the top module name, the simulator and its version, cocotb's version and the
build recipe below; a second request for the same key reuses it (no rebuild). A build is made
in a temporary directory and renamed into place only when it succeeded, under a file lock, so
the cache never holds a half-built entry and concurrent requests build once. A failed build's
directory is kept as ``<name>.failed/`` with its ``build.log`` for the user to read. Each new
build keeps the work directory's caches within ``$ACCEL_DSE_SIM_CACHE_MB``
(``accel_dse.simulate.runner.cache_bound``: least recently used builds and Verilog entries out first).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from accel_dse.simulate.runner.cache_bound import budget_bytes, mark_used, prune, tree_bytes
from accel_dse.simulate.runner.memory_zeroing import zero_memories
from accel_dse.simulate.runner.process import ProcessOutcome, run_in_group
from accel_dse.simulate.runner.tools import Simulator
from accel_spec.errors import SimulationError

__all__ = ["Build", "build_design", "build_hooks", "default_work_dir", "ports_of"]

#: Bumped whenever the build commands below change, so old cache entries are not reused.
RECIPE_VERSION = 4

#: Verilator options: Amaranth's Verilog trips width warnings, which must not stop the build;
#: ``-O3`` and fast X handling (no X randomisation code: the testbench resets the design and every
#: signal it reads is driven) for speed.
VERILATOR_ARGS: tuple[str, ...] = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-O3", "--x-assign", "fast",
                                   "--x-initial", "fast")

#: Modules of the array Verilator may keep as modules of their own (``no_inline``, suffixes of the
#: export's module names, e.g. ``"_row"``, ``"_pe"``). None by default: measured on 64x64 WS
#: (bench/sim_scaling.py, docs/simulate.md), keeping the row apart changed neither the build's
#: CPU time nor the speed beyond the noise, and keeping the PE apart still left per-instance code
#: (an 8.5 MB root file) and a slower 16x16. The results are bit-identical either way (a test).
SHARED_MODULE_SUFFIXES: tuple[str, ...] = ()

#: Modules of the array Verilator verilates and compiles once as hierarchical blocks
#: (``--hierarchical`` and a ``hier_block`` line each; suffixes as above): the array row, whose
#: C++ is then written and compiled once, whatever the number of rows. Used for designs of at
#: least :data:`HIER_MIN_PES` PEs (:func:`hier_blocks_for`). Measured on a 32x32 WS SoC
#: (``bench/sim_scaling.py``, load ~11): build 31 CPU-s instead of 175, simulation about a third
#: fewer cycles per CPU-second (each row is a model of its own, called through DPI wrappers).
#: The block of rows (``"_block"``, 32 rows and more) as a hierarchical block too (nested, it holds
#: row blocks; works, results identical on a 32x4) shrank the 128x128 top's C++ from 24 MB to 14 MB
#: and, the same day (load 9-12), its build from 202 to 154 CPU-s (493 / 616 s wall) at the same
#: speed (845 / 883 cycles per CPU-s); on 32x32 45 vs 47 CPU-s (its row C++ a ccache hit). Not yet
#: the default: measured once, and the test of it builds a 32-row design
#: (``bench/sim_scaling.py --hier-blocks _row,_block``).
#: The vector unit (``"_vector"``) and the output stage (``"_ostage"``), both named by their own text
#: (``rtl_gen.tools.verilog_export``), are blocks too: they are most of a big design's C++ (64x32 WS
#: with a 64-lane unit: 2.1 and 0.44 MB of 3.3 MB of Verilog), and designs that differ only in
#: buffers share them word for word, so ccache compiles them once.
HIER_BLOCK_SUFFIXES: tuple[str, ...] = ("_row", "_vector", "_ostage")

#: Smallest array (rows x cols) built with hierarchical blocks; smaller ones build flat.
HIER_MIN_PES = 1024

#: Icarus options. cocotb's runner compiles with ``-g2012``, under which Icarus gives the
#: declaration initialisers of Yosys' time-0 trigger registers (``reg \$auto$...dump_module$N
#: = 0``) no event, so Amaranth's ``always @*`` blocks never run until an input changes and
#: controller outputs stay X after reset. Amaranth writes plain Verilog-2005; ``-g2005`` (given
#: after ``-g2012``, so it wins) restores the time-0 evaluation.
ICARUS_ARGS: tuple[str, ...] = ("-g2005",)

#: Seconds a build may take before it is killed (a 16x16 array takes ~75 s cold).
DEFAULT_BUILD_TIMEOUT_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Build:
    """A finished simulator build of one design.

    Attributes:
        simulator: The simulator it was built for.
        top: Name of the top module.
        directory: The build directory (what cocotb's runner calls ``build_dir``).
        key: Cache key (hex digest).
        cached: True when this call reused an existing build.
        seconds: Wall time of the build itself, s (of the original build when cached).
    """

    simulator: Simulator
    top: str
    directory: Path
    key: str
    cached: bool
    seconds: float

    @property
    def log(self) -> Path:
        """The build log."""
        return self.directory / "build.log"


def default_work_dir() -> Path:
    """``$XDG_CACHE_HOME/accel-dse/sim`` (default ``~/.cache/accel-dse/sim``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accel-dse" / "sim"


def ports_of(verilog: str, top: str) -> list[str] | None:
    """Port names of module ``top`` in ``verilog`` (either header style), or None if not found."""
    match = re.search(rf"\bmodule\s+{re.escape(top)}\s*(?:#\s*\(.*?\)\s*)?\((.*?)\)\s*;", verilog, re.S)
    if match is None:
        return None
    names = []
    for part in match.group(1).split(","):
        words = re.findall(r"\\\S+|[A-Za-z_][A-Za-z0-9_$]*", re.sub(r"\[[^\]]*\]", " ", part))
        if words:
            names.append(words[-1])
    return names or None


def shared_modules(verilog: str, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """The modules of ``verilog`` whose names end in one of ``suffixes`` (default
    :data:`SHARED_MODULE_SUFFIXES`: the ones Verilator keeps apart), or in one of them + ``_fault``."""
    suffixes = SHARED_MODULE_SUFFIXES if suffixes is None else suffixes
    names = re.findall(r"^\s*module\s+([A-Za-z_][A-Za-z0-9_$]*)", verilog, re.M)
    return [n for n in names if any(n.endswith(s) or n.endswith(s + "_fault") for s in suffixes)]


def hier_blocks_for(rows: int, cols: int) -> tuple[str, ...]:
    """Module suffixes to build as hierarchical blocks for a ``rows x cols`` array."""
    return HIER_BLOCK_SUFFIXES if rows * cols >= HIER_MIN_PES else ()


#: The registers of a simulation top's DRAM file backdoor (``rtl_gen.soc.sim_system.BACKDOOR``),
#: in its ``dram`` instance, which the testbench writes.
BACKDOOR_REGS = ("bd_cmd", "bd_lo", "bd_hi")


def _vlt_text(verilog: str, top: str, hier: tuple[str, ...] = ()) -> str:
    """A Verilator control file making only ``top``'s ports visible to cocotb, keeping the
    array's repeated modules apart (one C++ class each), and the ``hier`` blocks."""
    ports = ports_of(verilog, top) or ["*"]
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{top}" -var "{p.lstrip(chr(92))}"' for p in ports]
    lines += [f'no_inline -module "{name}"' for name in shared_modules(verilog)]
    lines += [f'hier_block -module "{name}"' for name in shared_modules(verilog, hier)]
    if re.search(rf"^\s*module\s+\\{re.escape(top)}\.dram\s", verilog, re.M):  # a simulation top
        # the DRAM model's file backdoor, which the testbench drives (rtl_gen.soc.sim_system)
        lines += [f'public_flat_rw -module "{top}.dram" -var "{var}"' for var in BACKDOOR_REGS]
    return "\n".join(lines) + "\n"


def _build_args(simulator: Simulator, verilog: str = "", hier: tuple[str, ...] = ()) -> list[str]:
    if simulator.name != "verilator":
        return list(ICARUS_ARGS)
    return list(VERILATOR_ARGS) + (["--hierarchical"] if shared_modules(verilog, hier) else [])


def _cache_key(verilog: str, top: str, simulator: Simulator, waves: bool = False,
               hier: tuple[str, ...] = ()) -> str:
    try:
        cocotb_version = importlib.metadata.version("cocotb")
    except importlib.metadata.PackageNotFoundError:
        cocotb_version = "unknown"
    recipe = {
        "verilog_sha256": hashlib.sha256(verilog.encode()).hexdigest(),
        "top": top,
        "simulator": simulator.name,
        "simulator_version": simulator.version,
        "cocotb": cocotb_version,
        "recipe": RECIPE_VERSION,
        "build_args": _build_args(simulator, verilog, hier),
        "shared_modules": list(SHARED_MODULE_SUFFIXES) if simulator.name == "verilator" else [],
        "build_env": {k: v for k, v in sorted(simulator.env.items()) if k != "PATH"},
    }
    if simulator.name == "icarus":  # its memories start at zero (runner.memory_zeroing); Verilator's key unchanged
        recipe["memories"] = "zeroed"
    if simulator.name == "verilator" and hier:  # (without them the key is what it always was)
        recipe["hier_blocks"] = list(hier)
    if waves:  # a build that can trace is another build (without it the key is what it always was)
        # FST with a window (Verilator --trace-fst; Icarus: the dump module's window plusargs)
        recipe["waves"] = "fst-window" if simulator.name == "icarus" or verilator_fst() else "vcd"
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


#: The calling context's :func:`build_hooks` (``before``, ``after``), or None.
_HOOKS: contextvars.ContextVar[tuple[Callable[[], None], Callable[[], None]] | None] = contextvars.ContextVar(
    "accel_dse_build_hooks", default=None)


@contextlib.contextmanager
def build_hooks(before: Callable[[], None], after: Callable[[], None]) -> Iterator[None]:
    """Within the block (in this thread or task), :func:`build_design` calls ``before()`` ahead of
    a build it does not find in the cache, and ``after()`` once it returns or raises, cached or not.
    ``accel_dse.verify`` so builds its first design alone, and the other designs' builds start only
    after it, reusing its compiled modules (rows, vector unit, output stage) through ccache instead
    of compiling the same ones at the same time."""
    token = _HOOKS.set((before, after))
    try:
        yield
    finally:
        _HOOKS.reset(token)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_design(
    verilog: str,
    *,
    top: str,
    simulator: Simulator,
    work_dir: Path | None = None,
    timeout: float | None = DEFAULT_BUILD_TIMEOUT_S,
    waves: bool = False,
    hier_blocks: tuple[str, ...] = (),
    announce: Callable[[], None] | None = None,
) -> Build:
    """Build ``verilog`` for ``simulator``, or reuse the cached build of the same text.

    Args:
        verilog: The complete Verilog source.
        top: Name of the top module.
        simulator: From :func:`accel_dse.simulate.find_simulator`.
        work_dir: Cache/work directory (default :func:`default_work_dir`).
        timeout: Seconds before the build is killed; ``None`` for no limit.
        waves: Build with waveform tracing (Verilator ``--trace --trace-fst``, Icarus cocotb's dump module);
            cached apart from the plain build.
        hier_blocks: Verilator: suffixes of modules to build as hierarchical blocks
            (:func:`hier_blocks_for`); ignored by Icarus and by builds with ``waves`` (one flat
            model traces every signal under one scope).
        announce: Called once before a build that is not in the cache starts (a CLI says what
            it builds and how long that takes: ``runner.eta.build_line``).

    Raises:
        SimulationError: the build failed or timed out (the message gives the log's path).
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top):
        raise SimulationError(f"top module name must be a plain Verilog identifier, not {top!r}")
    budget_bytes()  # a malformed bound is refused before anything is built
    builds = Path(work_dir or default_work_dir()).expanduser().resolve() / "builds"
    hier = tuple(hier_blocks) if simulator.name == "verilator" and not waves else ()  # traces: flat
    key = _cache_key(verilog, top, simulator, waves, hier)
    name = f"{top}-{simulator.name}{'-waves' if waves else ''}-{key}"
    final = builds / name
    hooks = _HOOKS.get()
    if hooks is None:
        return _build_or_reuse(verilog, top, simulator, builds, name, key, timeout, waves, hier, announce)
    try:
        if not (final / "build.json").is_file():
            hooks[0]()
        return _build_or_reuse(verilog, top, simulator, builds, name, key, timeout, waves, hier, announce)
    finally:
        hooks[1]()


def _build_or_reuse(verilog: str, top: str, simulator: Simulator, builds: Path, name: str, key: str,
                    timeout: float | None, waves: bool, hier: tuple[str, ...],
                    announce: Callable[[], None] | None = None) -> Build:
    final = builds / name
    with _locked(builds / f"{name}.lock"):
        meta = final / "build.json"
        if meta.is_file():
            seconds = float(json.loads(meta.read_text("utf-8")).get("seconds", 0.0))
            mark_used(meta)  # the cache bound removes the least recently used builds first
            return Build(simulator, top, final, key, True, seconds)
        if announce is not None:
            announce()
        tmp = builds / f"{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        outcome, log = _run_build(verilog, top, simulator, tmp, timeout, waves, hier)
        if not outcome.ok:
            failed = builds / f"{name}.failed"
            shutil.rmtree(failed, ignore_errors=True)
            tmp.rename(failed)
            what = f"timed out after {timeout:g} s" if outcome.timed_out else f"failed (exit {outcome.returncode})"
            raise SimulationError(f"{simulator.name} build of {top} {what}; log: {failed / log.name}")
        (tmp / "build.json").write_text(json.dumps({
            "key": key, "top": top, "simulator": simulator.name, "simulator_version": simulator.version,
            "seconds": round(outcome.seconds, 3), "built_at": time.time(), "bytes": tree_bytes(tmp),
        }, indent=2), "utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        prune(builds.parent, keep=final)
        return Build(simulator, top, final, key, False, outcome.seconds)


def _run_build(
    verilog: str, top: str, simulator: Simulator, directory: Path, timeout: float | None, waves: bool = False,
    hier: tuple[str, ...] = (),
) -> tuple[ProcessOutcome, Path]:
    source = directory / f"{top}.v"
    # Icarus reads a never-written word as X (X times 0 is X): its memories start at zero, as
    # Verilator's (--x-initial fast) and Amaranth's do; the exported Verilog itself is unchanged
    source.write_text(zero_memories(verilog) if simulator.name == "icarus" else verilog, "utf-8")
    sources = [str(source)]
    build_args = _build_args(simulator, verilog, hier)
    if simulator.name == "verilator":
        vlt = directory / f"{top}.vlt"
        vlt.write_text(_vlt_text(verilog, top, hier), "utf-8")
        sources.insert(0, str(vlt))  # the runner takes the language from the last source
    if waves and simulator.name == "verilator" and verilator_fst():
        build_args.append("--trace-fst")  # FST, not VCD: cocotb's harness then writes dump.fst
    if waves and simulator.name == "icarus":
        # cocotb's own dump module is SystemVerilog, which the -g2005 the design needs rejects
        dump = directory / f"{WAVES_MODULE}.v"
        dump.write_text(icarus_dump_module(top), "utf-8")
        sources.append(str(dump))
        build_args += ["-s", WAVES_MODULE]
    log = directory / "build.log"
    spec = {
        "action": "build", "simulator": simulator.name, "top": top, "build_dir": str(directory),
        "sources": sources, "build_args": build_args, "log_file": str(log),
        "waves": waves and simulator.name == "verilator",  # Verilator: --trace; Icarus: the module above
    }
    spec_path = directory / "build_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2), "utf-8")
    env = simulator.environ(clean_env())
    # ccache: paths under the cache's builds directory hashed relative to the compiler's directory, so
    # the same module (content-named rows, vector unit) compiled in another design's build is a hit
    env.setdefault("CCACHE_BASEDIR", str(directory.parent))
    env.setdefault("CCACHE_NOHASHDIR", "1")
    outcome = run_in_group(
        [sys.executable, "-m", "accel_dse.simulate.runner.child", str(spec_path)],
        cwd=directory, env=env, log_path=directory / "launcher.log", timeout=timeout,
    )
    if not (log.is_file() and log.stat().st_size):
        log = directory / "launcher.log"
    return outcome, log


#: The Icarus module that opens the waveform file (``+dumpfile_path=FILE``) and dumps the top from
#: ``+waves_from_ns=T`` for ``+waves_for_ns=D`` ns (the window; without them: the whole run).
WAVES_MODULE = "accel_dse_waves"


def icarus_dump_module(top: str) -> str:
    """Verilog-2005 source of :data:`WAVES_MODULE` for top module ``top`` (times in the 1 ns unit)."""
    return (f"module {WAVES_MODULE};\n"
            "  reg [8*1024-1:0] path;\n"
            "  reg [63:0] from_ns;\n"
            "  reg [63:0] for_ns;\n"
            "  initial begin\n"
            '    if ($value$plusargs("dumpfile_path=%s", path)) $dumpfile(path);\n'
            '    if (!$value$plusargs("waves_from_ns=%d", from_ns)) from_ns = 0;\n'
            '    if (!$value$plusargs("waves_for_ns=%d", for_ns)) for_ns = 0;\n'
            "    if (from_ns > 0) #(from_ns);\n"
            f"    $dumpvars(0, {top});\n"
            "    if (for_ns > 0) begin\n"
            "      #(for_ns);\n"
            "      $dumpoff;\n"
            "      $dumpflush;\n"
            "    end\n"
            "  end\n"
            "endmodule\n")


def verilator_fst() -> bool:
    """Verilator writes FST where its FST writer compiles: it needs lz4's header (``liblz4-dev``);
    without it a traced Verilator build writes a VCD."""
    dirs = ["/usr/include", "/usr/local/include", *filter(None, os.environ.get("CPATH", "").split(os.pathsep))]
    return any((Path(d) / "lz4.h").is_file() for d in dirs)


def clean_env() -> dict[str, str]:
    """``os.environ`` without pytest's marker (cocotb's runner changes behaviour under pytest)."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

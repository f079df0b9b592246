"""The Verilog cache (rtl_gen.tools.verilog_cache): the same request reuses its entry, a changed design
or generator gets a new one, a torn or altered entry is generated again and never returned; the
simulation top's vector unit is converted once per parameter set and the cached text is the text."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from accel_dse.design_files import load_design
from rtl_gen.tools import verilog_cache, verilog_export
from rtl_gen.tools.verilog_cache import cached_text, entry_path


class _Maker:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"module m{self.calls}; endmodule\n"


def test_the_same_fields_reuse_the_entry_and_changed_fields_get_a_new_one(tmp_path):
    make = _Maker()
    first = cached_text(tmp_path, {"kind": "x", "rows": 4}, make)
    assert cached_text(tmp_path, {"kind": "x", "rows": 4}, make) == first and make.calls == 1
    other = cached_text(tmp_path, {"kind": "x", "rows": 8}, make)
    assert make.calls == 2 and other != first
    assert entry_path(tmp_path, {"kind": "x", "rows": 4}) != entry_path(tmp_path, {"kind": "x", "rows": 8})
    assert cached_text(None, {"kind": "x", "rows": 4}, make) != first and make.calls == 3  # no cache: made


def test_a_read_marks_the_entry_used(tmp_path):
    """The simulation work directory's size bound removes the least recently used entries first
    (accel_dse.simulate.runner.cache_bound): a hit is a use."""
    make = _Maker()
    cached_text(tmp_path, {"kind": "x"}, make)
    path = entry_path(tmp_path, {"kind": "x"})
    os.utime(path, (1_000_000, 1_000_000))
    cached_text(tmp_path, {"kind": "x"}, make)
    assert make.calls == 1 and time.time() - path.stat().st_mtime < 60


def test_a_changed_generator_gets_a_new_entry(tmp_path, monkeypatch):
    make = _Maker()
    first = cached_text(tmp_path, {"kind": "x"}, make)
    monkeypatch.setattr(verilog_cache, "generator_fingerprint", lambda: "another generator")
    assert cached_text(tmp_path, {"kind": "x"}, make) != first and make.calls == 2


@pytest.mark.parametrize("damage", ["truncated", "edited", "no header", "empty"])
def test_a_torn_or_altered_entry_is_generated_again_never_used(tmp_path, damage):
    make = _Maker()
    fields = {"kind": "x"}
    cached_text(tmp_path, fields, make)
    path = entry_path(tmp_path, fields)
    raw = path.read_text("utf-8")
    header, text = raw.split("\n", 1)
    path.write_text({"truncated": raw[:-5], "edited": raw.replace("m1", "m9"), "no header": text,
                     "empty": ""}[damage], "utf-8")
    again = cached_text(tmp_path, fields, make)
    assert make.calls == 2 and again == "module m2; endmodule\n"
    assert cached_text(tmp_path, fields, make) == again and make.calls == 2  # the new entry is whole


def test_an_unwritable_cache_still_returns_the_text(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    make = _Maker()
    assert cached_text(blocker / "cache", {"kind": "x"}, make) == "module m1; endmodule\n"


# tiny with the vector unit, shrunk to 2 x 2: what is cached does not depend on the array, and each of
# the test's six conversions costs less
SMALL = dataclasses.replace(load_design("tiny"), vector_unit=True, rows=2, cols=2)


@pytest.fixture
def converted(monkeypatch) -> list[str]:
    """The names of the modules Amaranth converts from here on (``verilog_export._convert`` counted)."""
    names: list[str] = []
    real = verilog_export._convert

    def counting(component, name):
        names.append(name)
        return real(component, name)

    monkeypatch.setattr(verilog_export, "_convert", counting)
    return names


def test_the_simulation_top_is_cached_and_its_vector_unit_converted_once_per_parameter_set(tmp_path, converted,
                                                                                           uncached_verilog):
    plain = verilog_export.system_verilog(SMALL, dram=(4, 1024))
    placeholder = verilog_export._VECTOR_PLACEHOLDER
    assert converted.count(placeholder) == 1 and placeholder not in plain
    assert "_vector " in plain  # the unit's module, named by its text
    converted.clear()
    cached = verilog_export.system_verilog(SMALL, dram=(4, 1024), cache_dir=tmp_path)
    assert cached == plain  # the cache changes nothing in the text
    converted.clear()
    assert verilog_export.system_verilog(SMALL, dram=(4, 1024), cache_dir=tmp_path) == plain and converted == []
    # another design with the same unit (the ofmap does not change it): its top converted, the unit reused
    other = dataclasses.replace(SMALL, ofmap_sram_kib=SMALL.ofmap_sram_kib * 2)
    text = verilog_export.system_verilog(other, dram=(4, 1024), cache_dir=tmp_path)
    assert converted and placeholder not in converted and text != plain
    # a bigger DRAM model is another simulation top
    converted.clear()
    verilog_export.system_verilog(SMALL, dram=(4, 2048), cache_dir=tmp_path)
    assert converted and placeholder not in converted


def test_the_core_export_is_cached_by_design_fault_and_flatness_and_by_the_environments_directory(
        tmp_path, monkeypatch, converted, uncached_verilog):
    core = dataclasses.replace(SMALL, vector_unit=False)
    plain = verilog_export.to_verilog(core)
    made = len(converted)
    assert made > 1  # the top, the row, the PE
    assert verilog_export.to_verilog(core, cache_dir=tmp_path) == plain and len(converted) == 2 * made
    assert verilog_export.to_verilog(core, cache_dir=tmp_path) == plain and len(converted) == 2 * made  # stored
    fault = verilog_export.Fault(row=1, col=0)
    faulty = verilog_export.to_verilog(core, fault=fault, cache_dir=tmp_path)
    flat = verilog_export.to_verilog(core, flat=True, cache_dir=tmp_path)
    assert len({plain, faulty, flat}) == 3  # each its own entry
    # without cache_dir: the directory of the environment's variable, when set
    monkeypatch.setenv(verilog_export.CACHE_ENV, str(tmp_path))
    converted.clear()
    assert verilog_export.to_verilog(core) == plain and verilog_export.to_verilog(core, fault=fault) == faulty
    assert converted == []
    path = tmp_path / "out"
    assert verilog_export.write_verilog(core, path).read_text(encoding="utf-8") == plain and converted == []

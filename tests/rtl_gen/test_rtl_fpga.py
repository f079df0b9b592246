# amaranth: UnusedElaboratable=no
"""The FPGA flow: real place and route of ``tiny`` on an ECP5-85k (cached), report parsing on
captured tool output (``data/``, from this flow's Yosys 0.70 / nextpnr 0.11.1 runs), the report
cache, and the command's errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import rtl_gen.tools.fpga as fpga_mod
from accel_dse.design_files import load_preset
from accel_spec.errors import ConfigError, FpgaToolError, RtlError
from rtl_gen import FAMILIES, fpga_report
from rtl_gen.tools.fpga import critical_path, parse_fmax, parse_utilisation, parse_yosys_cells, summarise
from rtl_gen.tools.yowasp import tool_command

DATA = Path(__file__).resolve().parent / "data"
ECP5 = FAMILIES["ecp5"]


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# -- parsing captured output -------------------------------------------------------------------


def test_yosys_stat_cells_are_read_by_type() -> None:
    cells = parse_yosys_cells(_text("ecp5_tiny_stat.txt"))
    assert cells == {"CCU2C": 434, "DP16KD": 12, "LUT4": 1103, "MULT18X18D": 16, "PFUMX": 28, "TRELLIS_FF": 1624}


def test_nextpnr_utilisation_table_and_fmax() -> None:
    log = _text("ecp5_tiny_pnr.log")
    table = parse_utilisation(log)
    assert len(table) == 28  # every bel type of the LFE5U-85F listed, none from the second report
    assert table["DP16KD"] == {"used": 12, "available": 208}
    assert table["MULT18X18D"] == {"used": 16, "available": 156}
    assert table["TRELLIS_COMB"] == {"used": 2121, "available": 83640}
    assert parse_fmax(log) == {"clk": 60.71}  # the post-route figure, not the 60.93 after placement


def test_critical_path_matches_the_fmax() -> None:
    path = critical_path(json.loads(_text("ecp5_tiny_report.json")))
    assert path is not None
    assert path["from"] == "ifmap_bank3.0.0" and path["to"].startswith("array.")
    assert 0 < path["logic_ns"] < path["delay_ns"]
    assert path["delay_ns"] == pytest.approx(1000 / 60.71, rel=0.01)  # the worst path sets Fmax


def test_summary_of_a_run_that_fits() -> None:
    cells = parse_yosys_cells(_text("ecp5_tiny_stat.txt"))
    result = summarise(ECP5, cells, _text("ecp5_tiny_pnr.log"), json.loads(_text("ecp5_tiny_report.json")), 0, "", 50.0)
    assert result["fits"] and result["overflow"] == {}
    assert result["resources"] == {"luts": 1131, "ffs": 1624, "carry": 434, "dsps": 16, "brams": 12, "lutram": 0}
    assert result["meets_freq"] is True  # 60.71 MHz >= 50 MHz
    assert set(result["utilisation"]) == {"DP16KD", "MULT18X18D", "TRELLIS_FF", "TRELLIS_COMB"}


def test_resource_overflow_is_a_result_not_an_error() -> None:
    log = _text("ecp5_tiny_pnr.log").replace("DP16KD:      12/    208     5%", "DP16KD:      68/     56   121%", 1)
    result = summarise(ECP5, {}, log, {}, 1, "ERROR: Unable to place cell 'x'", 100.0)
    assert result["fits"] is False
    assert result["overflow"] == {"DP16KD": {"used": 68, "available": 56}}
    assert result["fmax_mhz"] == {} and result["meets_freq"] is False


def test_no_pads_left_is_an_io_overflow() -> None:
    result = summarise(FAMILIES["gatemate"], {}, _text("gatemate_tiny_pnr.log"), {}, 125, "", 100.0)
    assert result["fits"] is False and list(result["overflow"]) == ["io"]


def test_other_tool_failures_raise_the_first_error_line() -> None:
    log = "Info: Packing IOs..\nERROR: cell type 'FOO' is unsupported\nERROR: second\n"
    with pytest.raises(FpgaToolError, match=r"failed: cell type 'FOO' is unsupported$") as info:
        summarise(ECP5, {}, log, {}, 1, "", 100.0)
    assert info.value.exit_code == 1


def test_missing_tool_names_the_package() -> None:
    with pytest.raises(RtlError, match="yowasp-nextpnr-nosuch is not installed: pip install 'yowasp-nextpnr-nosuch'"):
        tool_command("yowasp-nextpnr-nosuch")


# -- the cache -----------------------------------------------------------------------------------


def _fake_flow(calls: list[dict[str, Any]]) -> Any:
    def flow(verilog: str, top: str, **kw: Any) -> dict[str, Any]:
        calls.append(kw)
        return {"top": top, "fits": True, "freq_mhz": kw["freq_mhz"], "fmax_mhz": {"clk": 1.0}}

    return flow


def test_reports_are_cached_by_verilog_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(fpga_mod, "fpga_flow", _fake_flow(calls))
    # cut to 2 x 2 like the real place and route below: every call converts the Verilog for its key
    tiny = dataclasses.replace(load_preset("tiny"), rows=2, cols=2)
    first = fpga_report(tiny, cache_dir=tmp_path)
    again = fpga_report(tiny, cache_dir=tmp_path)
    assert (first["cached"], again["cached"]) == (False, True)
    assert len(calls) == 1 and calls[0]["freq_mhz"] == tiny.clock_mhz and calls[0]["device"] == "85k"
    fpga_report(tiny, cache_dir=tmp_path, freq_mhz=50.0)
    fpga_report(tiny, cache_dir=tmp_path, seed=2)
    fpga_report(tiny, cache_dir=tmp_path, device="25k")
    fpga_report(dataclasses.replace(tiny, ifmap_sram_kib=8), cache_dir=tmp_path)
    assert len(calls) == 5  # each different setting or Verilog misses
    fpga_report(tiny, cache_dir=tmp_path, use_cache=False)
    assert len(calls) == 6
    monkeypatch.setattr(fpga_mod, "_version", lambda package: "9.9")  # a tool upgrade misses too
    assert fpga_report(tiny, cache_dir=tmp_path)["cached"] is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "xilinx"}, "FPGA family must be one of ecp5, nexus, gatemate, not 'xilinx'"),
        ({"device": "99k"}, "ecp5 device must be one of 12k, 25k, 45k, 85k, .*, not '99k'"),
        ({"freq_mhz": 0.0}, "FPGA target frequency must be a positive number of MHz, not 0"),
        ({"freq_mhz": -5.0}, "not -5"),
    ],
)
def test_bad_settings_raise_before_any_tool_runs(kwargs: dict[str, Any], message: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(fpga_mod, "fpga_flow", _fake_flow(calls))
    with pytest.raises(ConfigError, match=message):
        fpga_report(load_preset("tiny"), cache_dir=tmp_path, **kwargs)
    assert calls == [] and not (tmp_path / "fpga").exists()


# -- the command -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--family", "virtex"], "not 'virtex'"),
        (["--family", "nexus", "--device", "85k"], "nexus device must be one of lifcl-17, lifcl-40, not '85k'"),
        (["--freq", "0"], "positive number of MHz, not 0"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(run_cli, args: list[str], needle: str) -> None:  # type: ignore[no-untyped-def]
    code, stdout, stderr = run_cli("rtl", "fpga", "tiny", *args)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and needle in stderr


def test_cli_json_and_table(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    cells = parse_yosys_cells(_text("ecp5_tiny_stat.txt"))
    captured = summarise(ECP5, cells, _text("ecp5_tiny_pnr.log"), json.loads(_text("ecp5_tiny_report.json")), 0, "",
                         500.0)

    def flow(verilog: str, top: str, **kw: Any) -> dict[str, Any]:
        return {"family": "ecp5", "device": kw["device"], "top": top, "freq_mhz": kw["freq_mhz"], "seed": kw["seed"],
                "out_of_context": True, **captured, "seconds": {"synth": 1.0, "pnr": 2.0}, "tools": {}}

    monkeypatch.setattr(fpga_mod, "fpga_flow", flow)
    monkeypatch.setenv("ACCEL_DSE_CACHE_DIR", str(tmp_path))
    code, stdout, _ = run_cli("rtl", "fpga", "tiny", "--family", "ecp5", "--device", "85k", "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["fits"] is True and data["meets_freq"] is False and data["freq_mhz"] == 500.0
    assert data["fmax_mhz"] == {"clk": 60.71} and data["resources"]["dsps"] == 16 and data["cached"] is False
    code, stdout, _ = run_cli("rtl", "fpga", "tiny")
    assert code == 0
    assert "(cached)" in stdout and "fmax clk: 60.71 MHz (misses 500 MHz)" in stdout and "fits: yes" in stdout


# -- one real place and route ------------------------------------------------------------------


@pytest.mark.slow
def test_a_2x2_tiny_places_and_routes_on_an_ecp5_85k() -> None:
    """Synthesis, placement and routing for real, of ``tiny`` cut to 2 x 2 PEs (the flow is the
    same; its SoC around the array is most of the design: 97 s here against 156 s at 4 x 4)."""
    tiny = dataclasses.replace(load_preset("tiny"), rows=2, cols=2)
    rep = fpga_report(tiny, family="ecp5", device="85k")
    assert rep["fits"] is True and rep["out_of_context"] is True
    res = rep["resources"]
    # one 8 x 8 multiplier per PE in a MULT18X18D, and 4 for each output-stage lane's 32 x 32 multiply
    assert res["dsps"] == tiny.rows * tiny.cols + 4 * tiny.cols
    # at least the a, weight (and its shadow) and partial-sum registers of every PE
    assert res["ffs"] >= tiny.rows * tiny.cols * (3 * tiny.input_bits + tiny.acc_bits)
    assert res["ffs"] == rep["utilisation"]["TRELLIS_FF"]["used"]  # Yosys and nextpnr agree
    assert res["brams"] >= 1 and res["brams"] == rep["utilisation"]["DP16KD"]["used"]
    assert 10.0 < rep["fmax_mhz"]["clk"] < tiny.clock_mhz  # a 500 MHz target is far beyond an ECP5
    assert rep["meets_freq"] is False and rep["critical_path"]["delay_ns"] > 0
    again = fpga_report(tiny, family="ecp5", device="85k")
    assert again["cached"] is True
    assert {k: v for k, v in again.items() if k != "cached"} == {k: v for k, v in rep.items() if k != "cached"}

"""accel-dse evaluate: per-op table and totals, JSON, errors."""

from __future__ import annotations

import json
import math

WORKLOAD = "gemm:m=64,k=96,n=80,batch=2"


def _edge_without_unit(tmp_path):
    """A design file: the edge preset with ``vector_unit = false``."""
    from accel_dse.design_files import load_design

    design = tmp_path / "edge_bare.toml"
    design.write_text("[design]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in
                                            {**load_design("edge").to_dict(), "vector_unit": False}.items()))
    return str(design)


def _vector_runs(design: str, workload: str, kind: str) -> int:
    """``VECTOR`` commands in the own program of ``workload``'s first ``kind`` op on ``design``."""
    import workloads
    from accel_dse.design_files import load_design
    from accel_spec.isa import Opcode
    from perf_model.compiler.vector_chunks import vector_op_program

    op = next(op for op in workloads.resolve(workload).vector_ops if op.kind == kind)
    return sum(c.opcode == Opcode.VECTOR for c in vector_op_program(load_design(design), op).commands)


def test_evaluate_json_on_resnet18_edge(run_cli, tmp_path):
    code, out, err = run_cli("evaluate", "--design", _edge_without_unit(tmp_path), "--workload", "resnet18", "--json")
    assert code == 0, err
    bare = json.loads(out)  # no vector unit: the vector ops are host work, with their element counts
    assert bare["vector_ops"] == [] and bare["total"]["vector_cycles"] == 0
    assert {h["kind"] for h in bare["host_work"]} == {"add", "relu", "maxpool", "avgpool"}
    assert all(h["elements"] > 0 for h in bare["host_work"])
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "resnet18", "--json")  # with its unit
    assert code == 0, err
    data = json.loads(out)
    assert data["workload"] == "resnet18"
    assert data["design"]["rows"] == 16
    assert data["status"] == "ok"
    assert len(data["ops"]) >= 20
    keys = {"name", "status", "folds", "compute_cycles", "stall_cycles", "total_cycles", "utilization", "macs",
            "dram_read_bytes", "dram_write_bytes", "energy_pj"}
    for op in data["ops"]:
        assert keys <= set(op)
        assert 0 < op["utilization"] <= 1
    total = data["total"]
    assert keys - {"name", "status"} <= set(total)
    assert {"latency_s", "area_mm2", "power_w", "tops_per_w"} <= set(total)
    assert total["macs"] == sum(op["macs"] for op in data["ops"])
    # edge runs ResNet-18 as one program: the totals' cycles are its walk, the ops their breakdown
    net = data["network"]
    assert net is not None and "total_cycles" in net
    assert (total["total_cycles"], total["compute_cycles"]) == (net["total_cycles"], net["compute_cycles"])
    assert bare["network"] is None  # without the unit: the op-by-op programs, the ops' cycles summed
    assert bare["total"]["compute_cycles"] == sum(op["compute_cycles"] for op in bare["ops"])
    assert math.isclose(total["energy_pj"], sum(total["energy_breakdown"].values()), rel_tol=1e-12)
    # the residual adds and ReLUs run on the vector unit, after the matrix ops: their cycles, their
    # energy (logic, SRAM, DRAM) and the leakage of the longer run come on top of the matrix ops'
    assert data["vector_ops"] and total["vector_cycles"] == net["vector_cycles"]
    vector_parts = sum(total["energy_breakdown"][p] for p in ("vector", "vector_sram", "vector_dram"))
    assert vector_parts > 0
    assert sum(op["energy_pj"] for op in data["ops"]) + vector_parts < total["energy_pj"]
    assert math.isclose(total["total_cycles"], total["compute_cycles"] + total["vector_cycles"] + total["stall_cycles"])
    assert data["host_work"] == []  # the pools run on the unit too: its window walk, cycles by hand
    pools = {v["kind"]: v for v in data["vector_ops"] if v["kind"] in ("maxpool", "avgpool")}
    # the stem's 3x3/2 pad-1 max pool, 112x112x64 -> 56x56 in 4 words of 16 lanes: the first window
    # row and column are clipped (2 of 3 inside), the other 55 whole; 2 set-up cycles, and a word
    # takes its in-image reads plus 2. Its image does not fit edge's ifmap: its own program runs it
    # in bands of output rows, each a run of its own with its 2 set-up cycles
    inside = 2 + 55 * 3
    runs = _vector_runs("edge", "resnet18", "maxpool")
    assert runs > 1 and pools["maxpool"]["cycles"] == 2 * runs + 4 * (inside * inside + 2 * 56 * 56)
    assert pools["avgpool"]["cycles"] == 2 + 32 * (7 * 7 + 2)  # the global 7x7 average of 512 channels
    assert 1.7e9 < total["macs"] < 1.9e9  # ResNet-18 at 224: ~1.8 GMACs


def test_evaluate_names_the_chains_of_convs_it_keeps_on_chip(run_cli):
    """``tiny`` on ResNet-18 at 32x32: the blocks' conv1 -> conv2 links it keeps are named, marked in
    the on-chip column and JSON; ``--no-reuse`` keeps none and moves more DRAM bytes."""
    code, out, err = run_cli("evaluate", "--design", "tiny", "--workload", "resnet18:res=32", "--json")
    assert code == 0, err
    ops = {op["name"]: op for op in json.loads(out)["ops"]}
    kept = [name for name, op in ops.items() if op["on_chip"] == "out"]
    assert kept and all(name.endswith(".conv1") for name in kept)
    assert all(ops[name.replace(".conv1", ".conv2")]["on_chip"] == "in" for name in kept)
    code, table, err = run_cli("evaluate", "--design", "tiny", "--workload", "resnet18:res=32")
    assert code == 0, err
    (line,) = [x for x in table.splitlines() if x.startswith("chains of convolutions kept on chip")]
    assert line.count(" -> ") == len(kept) and all(name in line for name in kept)
    code, out, err = run_cli("evaluate", "--design", "tiny", "--workload", "resnet18:res=32", "--json", "--no-reuse")
    assert code == 0, err
    alone = json.loads(out)
    assert len(alone["ops"]) == len(ops) and all(op["on_chip"] == "" for op in alone["ops"])
    assert sum(op["dram_write_bytes"] for op in ops.values()) < alone["total"]["dram_write_bytes"]


def test_evaluate_table(run_cli, tmp_path):
    design = tmp_path / "d.toml"
    design.write_text('[design]\nrows = 8\ncols = 8\ndataflow = "os"\n')
    code, out, err = run_cli("evaluate", "--design", str(design), "--workload", WORKLOAD)
    assert code == 0, err
    assert "8x8-os-i8" in out
    assert "compute cycles" in out and "TOPS/W" in out and "energy part" in out
    assert "utilization" not in out  # one spelling: utilisation


def test_evaluate_bert_shows_heads_as_instances_and_the_vector_work(run_cli, tmp_path):
    """BERT's attention scores and context run once per head: 12 GEMM instances per run, and the
    MACs column counts all of them; the vector ops are listed with their cycles on the unit (edge
    has ``vector_unit``), and as host work with their element counts on edge without it."""
    code, out, err = run_cli("evaluate", "--design", _edge_without_unit(tmp_path), "--workload", "bert_base")
    assert code == 0, err
    assert "vector ops, on the vector unit" not in out
    host = out[out.index("vector ops the vector unit cannot run"):]
    assert "no vector unit (vector_unit = false)" in host
    assert f"{512 * 3072:,}" in host  # the FFN's GELU, named with its element count
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "bert_base")
    assert code == 0, err
    lines = out.splitlines()
    header = lines[1].split("  ")
    header = [h.strip() for h in header if h.strip()]
    assert header[:5] == ["op", "runs", "instances", "m x k x n", "GMACs"]
    for unit in ("util %", "DRAM MB", "energy mJ", "compute cycles", "stall cycles"):
        assert unit in header, unit
    rows = {line.split()[0]: line.split() for line in lines[3:11]}
    scores = rows["attention/scores"]
    assert scores[1:4] == ["1", "12", "512x64x512"]
    assert float(scores[4]) == 0.20  # 12 x 512 x 64 x 512 = 0.201 G MACs
    assert rows["attention/query"][1:4] == ["1", "1", "512x768x768"]
    assert any(line.startswith("utilisation ") and line.endswith(" %") for line in lines)
    vector = out[out.index("vector ops, on the vector unit"):out.index("data layout, free")]
    rows = {line.split()[0]: line.split()[1:] for line in vector.splitlines()[3:] if line.strip()}
    # kind, name, runs, elements, cycles (all runs), DRAM bytes; 16 lanes on edge
    assert rows["softmax"][1:3] == ["1", f"{12 * 512 * 512:,}"]  # 12 heads x 512 x 512 scores
    assert rows["gelu"][1:3] == ["1", f"{512 * 3072:,}"]  # the FFN's hidden layer
    # GELU, one pass over 512 x 3072 / 16 words: 1 + words + 2 cycles a run (accel_spec.vector_isa),
    # in runs of the words edge's ifmap holds (its own program's chunks)
    runs = _vector_runs("edge", "bert_base", "gelu")
    assert runs > 1 and rows["gelu"][3] == f"{3 * runs + 512 * 3072 // 16:,}"
    assert "vector cycles" in out and "cannot run" not in out  # BERT has no op left for the host
    assert "other host work" not in out  # the requantisation is the output stage's: no arithmetic left
    other = " ".join(out[out.index("data layout, free"):].split())
    assert "transpose x1 (393 k elements)" in other  # what is left, named as free, with its element count
    assert "e+0" not in out and "e-0" not in out


def test_evaluate_infeasible_design_reports_reason(run_cli, tmp_path):
    design = tmp_path / "d.toml"
    design.write_text("[design]\nrows = 256\ncols = 256\nofmap_sram_kib = 1\n")
    code, out, err = run_cli("evaluate", "--design", str(design), "--workload", WORKLOAD, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "infeasible"
    assert "ofmap buffer" in data["reason"]
    code, out, err = run_cli("evaluate", "--design", str(design), "--workload", WORKLOAD)
    assert "infeasible: op" in out


def test_evaluate_bad_inputs_exit_2_with_one_line(run_cli, tmp_path):
    for argv, needle in [
        (("--design", "nope", "--workload", WORKLOAD), "neither a design file nor a preset"),
        (("--design", str(tmp_path / "missing.toml"), "--workload", WORKLOAD), "not found"),
        (("--design", "edge", "--workload", "nope"), "unknown workload"),
    ]:
        code, out, err = run_cli("evaluate", *argv)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1 and needle in err


def test_evaluate_llama_decode_runs_rope_on_the_unit(run_cli, tmp_path):
    """LLaMA decode on edge with the unit leaves no vector op to the host: its two RoPEs (one token,
    32 heads of 128, on 16 lanes: 32 rows of 8 words) take 1 + 32 * (2 * 8 + 2 + 1) cycles each,
    their table (one position: 64 cos and 64 sin of 16 bits) read from DRAM once; on edge without
    the unit they are host work, as every vector op is."""
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "llama_decode", "--json")  # with its unit
    assert code == 0, err
    data = json.loads(out)
    assert data["host_work"] == []
    ropes = [v for v in data["vector_ops"] if v["kind"] == "rope"]
    assert [v["cycles"] for v in ropes] == [1 + 32 * (2 * 8 + 2 + 1)] * 2 == [609, 609]
    assert [v["dram_read_bytes"] for v in ropes] == [32 * 128 + 2 * 2 * 64] * 2
    code, out, err = run_cli("evaluate", "--design", _edge_without_unit(tmp_path), "--workload", "llama_decode",
                             "--json")
    assert code == 0, err
    host = [h for h in json.loads(out)["host_work"] if h["kind"] == "rope"]
    assert len(host) == 2 and all("no vector unit" in h["reason"] for h in host)
    code, out, err = run_cli("workloads", "show", "llama_decode")
    assert code == 0, err
    listing = out[out.index("vector op  runs"):]
    assert "rope          2     8,192" in listing and "host work" not in listing.split("vector ops run on")[0]

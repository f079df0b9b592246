"""What a workload leaves beside its matrix and vector ops: the output stage's requantisation is
its matrix op's, layout and scalar index work are named as free, tensor arithmetic stays host work."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import workloads
from accel_dse.cli.workloads import workload_json
from workloads._requant import derived_requant, output_stage
from workloads.host_work import host_work


@pytest.mark.parametrize("spec", ["bert_base:seq=64", "llama_decode:kv=64,d=256,heads=4,ffn=512",
                                  "llama_block:seq=32,d=256,heads=4,ffn=512", "resnet18:res=32",
                                  "mobilenet_v2:res=32", "gpt2_decode:kv=16,layers=1"])
def test_builtins_leave_no_tensor_arithmetic_to_the_host(spec):
    data = workload_json(workloads.resolve(spec))
    assert data["host_arithmetic"] == {}
    assert data["other_primitives"]  # reshapes and transposes are still listed (as free)


def _traced(fn, *shapes):
    return workloads.trace(fn, *(jax.ShapeDtypeStruct(s, jnp.int8) for s in shapes), name="f")


def test_the_output_stage_is_its_matrix_ops_and_hand_written_arithmetic_is_not():
    rq = derived_requant(16)

    def staged(x, w):
        return output_stage(jnp.dot(x, w, preferred_element_type=jnp.int32), rq)

    def by_hand(x, w):
        acc = jnp.dot(x, w, preferred_element_type=jnp.int32)
        return jnp.clip(jnp.right_shift(acc * 3, 7), -128, 127).astype(jnp.int8)

    staged_wl, hand_wl = _traced(staged, (4, 16), (16, 8)), _traced(by_hand, (4, 16), (16, 8))
    assert host_work(staged_wl.other_primitives, staged_wl.other_elements).arithmetic == ()
    arithmetic = {name for name, _, _ in host_work(hand_wl.other_primitives, hand_wl.other_elements).arithmetic}
    assert {"mul", "shift_right_arithmetic"} <= arithmetic


def test_classes():
    work = host_work((("reshape", 2), ("exp", 1), ("add", 3), ("dot_general[empty]", 1), ("Transpose", 1)),
                     (("reshape", 100), ("exp", 64), ("add", 3)))
    assert [n for n, _, _ in work.layout] == ["reshape", "dot_general[empty]", "Transpose"]
    assert [n for n, _, _ in work.arithmetic] == ["exp"]  # 64 elements: tensor work
    assert [n for n, _, _ in work.scalar] == ["add"]  # one element a run: an index

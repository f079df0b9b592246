"""A Hugging Face ``config.json`` built with ``transformers`` on the ``meta`` device, traced through PyTorch.

:mod:`workloads._hf_config` sends here every ``model_type`` its own JAX builder does not cover
(``qwen3``, ``qwen2_moe``, ``qwen3_moe`` and any other architecture ``transformers`` knows). The
model is ``AutoModel.from_config``: the base model, embedding and final norm included, no LM head.
Its parameters are created on the ``meta`` device (no memory, no download, no weights); its
buffers keep their values (RoPE's frequency table, with the config's scaling). It is exported with
``torch.export`` and lowered by :mod:`workloads._torch_trace`: the same records as a float JAX model
of those layers.

Shapes (:func:`workloads._hf_config.hf_shape`): ``seq`` new tokens per sequence (default 128),
``batch`` (1), ``kv`` tokens already in the KV cache (0), ``layers`` (the config's), ``mode``
``prefill`` (no cache) or ``decode`` (one new token after ``kv``, default 128, cached ones). The
cache is given to the model as a ``DynamicCache`` filled with ``kv`` positions of each layer's keys
and values.

Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): which expert a token goes to depends on the
data, which a trace cannot follow. The routed experts are therefore laid out under the assumption
of a perfectly balanced load, as the JAX builder does: the ``tokens * top_k`` routed token copies
are dealt out in turn, expert ``e`` getting copies ``e, e + experts, ...``; each copy costs one
expert's MACs, and a token's ``top_k`` results, each weighted by its router probability, are added.
The router is traced as written: its matmul and softmax are the array's and the unit's, its top-k
selection and the weighting are host work (the JAX builder of :mod:`workloads._models_hf` leaves
those two out; its MACs and vector ops are the same).
Qwen2-MoE's shared expert and its gate run on every token, as written.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads.ops import Workload

__all__ = ["TRANSFORMERS_MISSING", "load_hf_torch", "hf_model"]

TRANSFORMERS_MISSING = ("transformers is not installed; install accel-dse's torch extra: "
                        "pip install -e '.[torch]' (scripts/setup.sh does)")


def _transformers() -> Any:
    from workloads._torch_trace import import_torch

    import_torch()
    try:
        import transformers
    except ImportError:
        raise WorkloadError(TRANSFORMERS_MISSING) from None
    return transformers


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Every ``nn.Parameter`` registered meanwhile moves to ``meta`` as it is registered (its
    ``torch.empty`` storage is never touched), buffers keep their values."""
    import torch

    register = torch.nn.Module.register_parameter

    def on_meta(module: Any, name: str, param: Any) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            module._parameters[name] = torch.nn.Parameter(param.to("meta"), requires_grad=False)

    torch.nn.Module.register_parameter = on_meta  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register  # type: ignore[method-assign]


def _balanced_experts(experts: Any, hidden: Any, top_k_index: Any, top_k_weights: Any) -> Any:
    """A fused experts module's forward with the routed copies dealt out evenly (module docstring)."""
    import torch
    import torch.nn.functional as F

    tokens, d = hidden.shape
    top_k = top_k_index.shape[-1]
    n = experts.gate_up_proj.shape[0]
    copies = hidden.repeat_interleave(top_k, dim=0)
    outs = []
    for e in range(n):
        part = copies[e::n]
        if part.shape[0] == 0:
            continue
        gate, up = F.linear(part, experts.gate_up_proj[e]).chunk(2, dim=-1)
        outs.append(F.linear(experts.act_fn(gate) * up, experts.down_proj[e]))
    routed = torch.cat(outs, dim=0).reshape(tokens, top_k, d) * top_k_weights[..., None].to(hidden.dtype)
    total = routed[:, 0]
    for j in range(1, top_k):
        total = total + routed[:, j]
    return total


def _balance_experts(model: Any) -> int:
    """Give every fused experts module (``gate_up_proj``, ``down_proj``) the balanced forward."""
    count = 0
    for module in model.modules():
        if hasattr(module, "gate_up_proj") and hasattr(module, "down_proj") and getattr(
                module.gate_up_proj, "ndim", 0) == 3:
            module.forward = lambda h, i, w, _m=module: _balanced_experts(_m, h, i, w)
            count += 1
    return count


def hf_model(cfg: dict[str, Any], shape: dict[str, int], what: str) -> tuple[Any, tuple[Any, ...], str]:
    """``(module, example_args, description)`` of the config at ``shape`` (the model on ``meta``).

    Raises:
        WorkloadError: torch/transformers missing, a ``model_type`` transformers does not know, or
            a config it refuses (its message's first line).
    """
    transformers = _transformers()
    import torch

    kind = str(cfg.get("model_type"))
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures", "transformers_version")}
    try:
        config = transformers.AutoConfig.for_model(kind, **fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise WorkloadError(f"{what} model_type {shown(repr(kind), 40)} is not one transformers "
                            f"{transformers.__version__} builds ({type(exc).__name__}: "
                            f"{shown(str(exc).splitlines()[0] if str(exc) else '', 120)})") from None
    if shape["layers"]:
        config.num_hidden_layers = shape["layers"]
    try:
        with _parameters_on_meta():
            model = transformers.AutoModel.from_config(config, attn_implementation="sdpa")
    except Exception as exc:  # a config transformers refuses
        line = next((x for x in str(exc).splitlines() if x.strip()), "")
        raise WorkloadError(f"{what}: transformers cannot build this {kind} config ({type(exc).__name__}: "
                            f"{shown(line, 200)})") from exc
    experts = _balance_experts(model)
    batch, seq, kv = shape["batch"], shape["seq"], shape["kv"]
    layers = int(config.num_hidden_layers)
    ids = torch.zeros(batch, seq, dtype=torch.long)
    if not kv:
        wrapper: Any = _Prefill(model)
        args: tuple[Any, ...] = (ids,)
    else:
        kv_heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
        cache = tuple(torch.empty(batch, kv_heads, kv, head_dim, device="meta") for _ in range(2 * layers))
        wrapper, args = _Decode(model, config), (ids, *cache)
    text = f"seq={seq}, batch={batch}, kv={kv}, layers={layers}"
    moe = (" with its routed experts' load balanced (an assumption: routing depends on the data)" if experts else "")
    return wrapper, args, (f"Hugging Face {kind} config via transformers {transformers.__version__}, base model "
                           f"(embedding and final norm, no LM head) [{text}]{moe}")


class _Prefill:  # built lazily as a torch.nn.Module subclass (torch is imported only when used)
    def __new__(cls, model: Any) -> Any:
        import torch

        class Prefill(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, ids: Any) -> Any:
                return self.model(input_ids=ids, use_cache=False).last_hidden_state

        return Prefill()


class _Decode:
    def __new__(cls, model: Any, config: Any) -> Any:
        import torch
        from transformers.cache_utils import DynamicCache

        class Decode(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, ids: Any, *cache: Any) -> Any:
                past = DynamicCache(config=config)
                for i in range(len(cache) // 2):
                    past.update(cache[2 * i], cache[2 * i + 1], i)
                return self.model(input_ids=ids, past_key_values=past, use_cache=True).last_hidden_state

        return Decode()


def load_hf_torch(cfg: dict[str, Any], shape: dict[str, int], *, name: str, what: str) -> Workload:
    """The workload of the config built by transformers (see the module docstring)."""
    from workloads._rope_scaling import config_rope
    from workloads._torch_trace import lower_module, trace_torch

    theta, scaling, unscaled = config_rope(cfg, what)
    module, args, description = hf_model(cfg, shape, what)
    model = lower_module(module, args, what)
    workload = trace_torch(model, name=name, description=description + (f" ({unscaled})" if unscaled else ""),
                           source="hf_config")
    # transformers' rates are a buffer of values, not a pow the matcher reads: the config's RoPE (the unit's table)
    ropes = tuple(dataclasses.replace(v, params=(("start", v.param("start", 0)), ("theta", theta), *scaling))
                  if v.kind == "rope" else v for v in workload.vector_ops)
    return dataclasses.replace(workload, vector_ops=ropes)

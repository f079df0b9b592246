"""A Hugging Face ``config.json`` (Llama, Mistral, Qwen2, Mixtral, GPT-2, BERT) -> a traced workload.

``--workload path/config.json[:seq=N,batch=B,kv=K,layers=L]`` reads the architecture's shapes
from the file (nothing is downloaded, no ``transformers`` needed) and traces the int8 form of
:func:`workloads._models_hf.gqa_moe_block` with them, as the builtins are traced: one decoder
block, its op and vector counts times ``num_hidden_layers`` (or ``layers``). Options: ``seq``
new tokens per sequence (default 128), ``batch`` (1), ``kv`` cached tokens (0: prefill; a decode
step is ``seq=1,kv=K``), ``layers`` (the config's). RoPE takes the config's ``rope_theta`` and its
``rope_scaling`` where the unit's table can hold it (``linear``, ``llama3``, ``dynamic``:
:mod:`workloads._rope_scaling`; another type is named in the description and left out). Left
out: the embedding lookup and the LM head.

Fields read: ``model_type``, ``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
``num_attention_heads``, ``num_key_value_heads`` (default: the heads) and, for ``mixtral``,
``num_local_experts`` and ``num_experts_per_tok``.

``gpt2``: one decode step, the builtin ``gpt2_decode``'s model
(:func:`workloads._models_transformer.gpt2_decode`, embedding and tied LM head included) with the
config's ``n_layer``, ``n_head``, ``n_embd``, ``n_inner`` (default ``4 * n_embd``),
``vocab_size`` (default 50,257) and ``n_positions`` (default 1,024; the cache must leave the new
token a position: ``kv < n_positions``). Options ``batch``, ``kv`` (default ``n_positions - 1``),
``layers``; ``seq`` must be 1 (a prefill of several tokens is not built for GPT-2: that builtin
decodes one token).

``bert``: the builtin ``bert_base``'s encoder layers (:func:`workloads._models_transformer.bert_base`,
no embedding or pooler) with ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads`` and
``intermediate_size``. Options ``seq`` (default 128), ``batch``, ``layers``; no ``kv`` (an encoder
has no cache).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads.ops import Workload

__all__ = ["MODEL_TYPES", "load_hf_config", "MAX_TRACED_MACS"]

#: ``model_type`` values this reader builds (LLaMA-style decoders, GPT-2 decoding, a BERT encoder).
MODEL_TYPES = ("llama", "mistral", "qwen2", "mixtral", "gpt2", "bert")
_OPTIONS = {"seq": 128, "batch": 1, "kv": 0, "layers": 0}
#: Cached tokens of ``mode=decode`` when ``kv`` is not given.
DECODE_KV = 128
#: Largest MACs of the one traced block (its trace builds every op record; more is refused up front).
MAX_TRACED_MACS = 10**15
_DIM_LIMIT = 1 << 20


def _field(cfg: dict[str, object], key: str, what: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise WorkloadError(f"{what} has no {key!r} (a {cfg.get('model_type')} config needs it)")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _DIM_LIMIT:
        raise WorkloadError(f"{what} field {key} must be an integer in [1, {_DIM_LIMIT:,}], "
                            f"not {shown(repr(value), 40)}")
    return value


def _read(path: Path, what: str) -> dict[str, object]:
    try:
        cfg = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"{what} is not a JSON file ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    if not isinstance(cfg, dict):
        raise WorkloadError(f"{what} must hold a JSON object (a Hugging Face config.json), not {type(cfg).__name__}")
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or not kind:
        raise WorkloadError(f"{what} has no model_type (a Hugging Face config.json names its architecture), "
                            f"not {shown(repr(kind), 40)}")
    return cfg


def hf_shape(options: dict[str, int | str], what: str) -> dict[str, int]:
    """The shape a config is traced at from the spec's options (``mode`` resolved; see the module
    docstring): ``{"seq", "batch", "kv", "layers"}`` (``layers`` 0: the config's).

    Raises:
        WorkloadError: an unknown option, a bad ``mode``, or a ``kv`` against ``mode=prefill``.
    """
    unknown = sorted(set(options) - set(_OPTIONS) - {"mode"})
    if unknown:
        raise WorkloadError(f"{what} has no option {unknown[0]!r}; its options are {', '.join(_OPTIONS)}, mode")
    mode = options.get("mode")
    if mode not in (None, "prefill", "decode"):
        raise WorkloadError(f"{what} option mode must be prefill or decode, not {shown(repr(mode), 40)}")
    ints = {k: v for k, v in options.items() if k != "mode"}
    if any(not isinstance(v, int) for v in ints.values()):
        bad = next(k for k, v in ints.items() if not isinstance(v, int))
        raise WorkloadError(f"{what} option {bad} must be a positive integer, not {shown(repr(ints[bad]), 40)}")
    shape = {k: int(v) for k, v in (_OPTIONS | ints).items()}
    if mode == "decode":
        shape["seq"] = int(ints.get("seq", 1))
        shape["kv"] = int(ints.get("kv", DECODE_KV))
    elif mode == "prefill" and ints.get("kv", 0):
        raise WorkloadError(f"{what} mode=prefill has no KV cache, so kv must not be given (a decode step is "
                            "mode=decode,kv=K)")
    return shape


def _settings(cfg: dict[str, object], opts: dict[str, int], what: str) -> dict[str, int]:
    d = _field(cfg, "hidden_size", what)
    heads = _field(cfg, "num_attention_heads", what)
    kv_heads = _field(cfg, "num_key_value_heads", what, heads)
    if d % heads or (d // heads) % 2:
        raise WorkloadError(f"{what} hidden_size {d} must be num_attention_heads {heads} times an even head size "
                            "(rotary embedding)")
    if heads % kv_heads:
        raise WorkloadError(f"{what} num_key_value_heads {kv_heads} must divide num_attention_heads {heads}")
    s = {"d": d, "heads": heads, "kv_heads": kv_heads, "ffn": _field(cfg, "intermediate_size", what),
         "layers": opts["layers"] or _field(cfg, "num_hidden_layers", what), "seq": opts["seq"],
         "batch": opts["batch"], "kv": opts["kv"], "experts": 0, "top_k": 1}
    if cfg["model_type"] == "mixtral":
        s["experts"] = _field(cfg, "num_local_experts", what)
        s["top_k"] = _field(cfg, "num_experts_per_tok", what, 2)
        if s["top_k"] > s["experts"]:
            raise WorkloadError(f"{what} num_experts_per_tok {s['top_k']} must be at most num_local_experts "
                                f"{s['experts']}")
    return s


#: A GPT-2 or BERT config's field for each dimension (the FFN: its field and default in units of d).
_ENCODER_FIELDS: dict[str, dict[str, Any]] = {
    "gpt2": {"d": "n_embd", "heads": "n_head", "layers": "n_layer", "ffn": ("n_inner", 4)},
    "bert": {"d": "hidden_size", "heads": "num_attention_heads", "layers": "num_hidden_layers",
             "ffn": ("intermediate_size", None)},
}


def _encoder_settings(cfg: dict[str, object], options: dict[str, int | str], shape: dict[str, int],
                      what: str) -> dict[str, int]:
    """The gpt2_decode / bert_base builtin's settings of a ``gpt2`` or ``bert`` config (one reading of
    the shared dimensions; GPT-2 adds its cache and vocabulary, BERT its sequence)."""
    kind = str(cfg["model_type"])
    f = _ENCODER_FIELDS[kind]
    d, heads = _field(cfg, str(f["d"]), what), _field(cfg, str(f["heads"]), what)
    if d % heads:
        raise WorkloadError(f"{what} {f['d']} {d} must be a multiple of {f['heads']} {heads}")
    ffn_key, per_d = f["ffn"]
    s = {"batch": shape["batch"], "layers": shape["layers"] or _field(cfg, str(f["layers"]), what), "d": d,
         "heads": heads, "ffn": _field(cfg, str(ffn_key), what, per_d * d if per_d else None)}
    if kind == "bert":
        if shape["kv"] or options.get("mode") == "decode":
            raise WorkloadError(f"{what} is a bert encoder, which has no KV cache: give seq, batch, layers "
                                "(not kv or mode=decode)")
        return s | {"seq": shape["seq"]}
    positions = _field(cfg, "n_positions", what, 1024)
    kv = int(options.get("kv", positions - 1))
    if kv >= positions:
        raise WorkloadError(f"{what} option kv must be below n_positions {positions} (the new token needs a "
                            f"position), not {kv}")
    return s | {"kv": kv, "vocab": _field(cfg, "vocab_size", what, 50257)}


def gpt2_macs(s: dict[str, int]) -> int:
    """MACs of one GPT-2 decode step with settings ``s``: per layer the fused QKV, scores and context
    against ``kv + 1`` keys, the projection and the FFN; then the LM head."""
    b, d, ffn, ctx = s["batch"], s["d"], s["ffn"], s["kv"] + 1
    return s["layers"] * (b * (4 * d * d + 2 * d * ffn) + 2 * b * ctx * d) + b * d * s["vocab"]


def bert_macs(s: dict[str, int]) -> int:
    """MACs of ``layers`` BERT encoder layers with settings ``s``: Q, K, V, output, scores, context, FFN."""
    tokens, d = s["batch"] * s["seq"], s["d"]
    return s["layers"] * (tokens * (4 * d * d + 2 * d * s["ffn"]) + 2 * s["batch"] * s["seq"] * s["seq"] * d)


def block_macs(s: dict[str, int]) -> int:
    """MACs of one block with settings ``s`` (the analytic count, checked before tracing)."""
    tokens, ctx, d, dh = s["batch"] * s["seq"], s["seq"] + s["kv"], s["d"], s["d"] // s["heads"]
    proj = tokens * d * (2 * d + 2 * s["kv_heads"] * dh)
    attn = 2 * s["batch"] * s["heads"] * s["seq"] * ctx * dh
    ffn = 3 * tokens * d * s["ffn"] * (s["top_k"] if s["experts"] else 1)
    router = tokens * d * s["experts"]
    return proj + attn + ffn + router


def _jax_builds(cfg: dict[str, object], options: dict[str, int | str], shape: dict[str, int]) -> bool:
    """Whether the JAX builder here builds this config at this shape (else transformers does):
    LLaMA-family configs without a sliding window in effect, GPT-2 decode steps, BERT."""
    kind = cfg["model_type"]
    if kind == "bert":
        return True
    if kind == "gpt2":
        return options.get("mode") != "prefill" and options.get("seq", 1) == 1
    if kind not in MODEL_TYPES:
        return False
    window = cfg.get("sliding_window")
    in_effect = isinstance(window, int) and (kind != "qwen2" or bool(cfg.get("use_sliding_window")))
    return not (in_effect and isinstance(window, int) and shape["seq"] + shape["kv"] > window)


def load_hf_config(path: Path, options: dict[str, int | str], *, name: str, what: str) -> Workload:
    """The workload of the config at ``path`` (see the module docstring).

    Raises:
        WorkloadError: not JSON, no ``model_type``, a missing or bad field or option, a block too
            big to trace (:data:`MAX_TRACED_MACS`), or (for an architecture built by transformers)
            transformers missing or refusing the config; each in one line.
    """
    from workloads._layers import FORMS
    from workloads._models_hf import gqa_moe_block
    from workloads._requant import recording, with_flow, with_requant
    from workloads._rope_scaling import config_rope
    from workloads._tracer import trace

    cfg = _read(path, what)
    shape = hf_shape(options, what)
    if not _jax_builds(cfg, options, shape):
        from workloads._hf_torch import load_hf_torch

        return load_hf_torch(cfg, shape, name=name, what=what)
    if cfg["model_type"] in ("gpt2", "bert"):
        return _encoder_or_gpt2(cfg, options, shape, name=name, what=what)
    s = _settings(cfg, shape, what)
    macs = block_macs(s)
    if macs > MAX_TRACED_MACS:
        raise WorkloadError(f"{what} block has {macs:.3g} MACs, more than the {MAX_TRACED_MACS:.0e} traced at "
                            "once: lower seq, batch or kv")
    layers = s.pop("layers")
    theta, scaling, unscaled = config_rope(cfg, what)
    model = gqa_moe_block(FORMS["int8"], **s, theta=theta, rope_scaling=scaling)
    flow: list[bool] = []
    text = ", ".join(f"{k}={v}" for k, v in (*s.items(), ("rope_theta", theta), *scaling))
    with recording(flow) as params:
        block = trace(model.fn, *model.example_args(), name=name, source="hf_config",
                      description=f"Hugging Face {cfg['model_type']} config, {layers} decoder blocks [{text}] "
                                  f"(no embedding or LM head{'; ' + unscaled if unscaled else ''})")
    block = with_flow(with_requant(block, params), flow)
    return dataclasses.replace(block, counts=tuple(c * layers for c in block.counts),
                               vector_counts=tuple(c * layers for c in block.vector_counts))


def _encoder_or_gpt2(cfg: dict[str, object], options: dict[str, int | str], shape: dict[str, int], *, name: str,
                     what: str) -> Workload:
    """A ``gpt2`` or ``bert`` config traced as its builtin's model, all layers (``lax.scan``)."""
    from workloads._layers import FORMS
    from workloads._models_transformer import bert_base, gpt2_decode
    from workloads._requant import recording, with_flow, with_requant
    from workloads._tracer import trace

    kind = str(cfg["model_type"])
    s = _encoder_settings(cfg, options, shape, what)
    build: Callable[..., Any]
    if kind == "gpt2":
        build, macs, text = gpt2_decode, gpt2_macs(s), "one decode step (embedding and LM head included)"
    else:
        build, macs, text = bert_base, bert_macs(s), "encoder layers (no embedding or pooler)"
    if macs > MAX_TRACED_MACS:
        raise WorkloadError(f"{what} has {macs:.3g} MACs, more than the {MAX_TRACED_MACS:.0e} traced at once: "
                            "lower seq, batch, kv or layers")
    model = build(FORMS["int8"], **s)
    flow: list[bool] = []
    settings = ", ".join(f"{k}={v}" for k, v in s.items())
    with recording(flow) as params:
        workload = trace(model.fn, *model.example_args(), name=name, source="hf_config",
                         description=f"Hugging Face {kind} config, {text} [{settings}]")
    return with_flow(with_requant(workload, params), flow)

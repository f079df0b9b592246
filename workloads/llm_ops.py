"""LLM shapes and the op records of one transformer layer on one chip of a split (stdlib only, no JAX).

An :class:`LlmShape` is a decoder-only transformer: ``layers`` blocks of attention (``heads``
query heads of ``head_dim``, ``kv_heads`` key/value heads: grouped-query when fewer) and a
feed-forward network, dense (``ffn`` wide, SwiGLU when ``gated``, else GELU) or a mixture of
``experts`` experts of ``expert_ffn`` with top-``top_k`` routing, then an LM head of ``vocab``.
Shapes of the builtin transformer workloads (``llama_block``: wq, wk, wv, scores, context, wo,
w_gate, w_up, w_down) are the ops of :func:`layer_ops`; a test holds the two equal.

:func:`layer_ops` gives the GEMMs one chip runs for one layer of a microbatch of ``seqs``
sequences under tensor parallelism ``tp`` (Megatron: QKV and the FFN's first matrices split by
columns, the output projection and the FFN's last matrix by rows, heads split over chips) and
expert parallelism ``ep`` (each chip holds ``experts / ep`` experts and computes the tokens the
``ep`` chips of its group route to them, balanced). :func:`backward` gives a forward GEMM's two
backward GEMMs (input gradient and weight gradient). Everything here is plain op records
(:mod:`workloads.ops`); the multi-chip model (``perf_model.pod``) costs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from accel_spec.errors import WorkloadError
from accel_spec.text import INT_RULE, parse_int
from workloads.ops import Gemm

__all__ = ["LlmShape", "LLM_SHAPES", "llm_shape", "layer_ops", "head_ops", "backward", "parse_llm_spec", "check_split",
           "whole_model_macs"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LlmShape:
    """A decoder-only transformer's dimensions (see the module docstring).

    Attributes:
        name: label; layers, d (model width), heads, kv_heads, head_dim (0: ``d / heads``),
        ffn (dense FFN width), vocab, gated (SwiGLU: gate, up, down; else up, down),
        experts (0: dense), top_k, expert_ffn, parallel_block (attention and FFN read the same
        input, one tensor-parallel all-reduce per layer and pass, as PaLM), source (where the
        figures come from).
    """

    name: str
    layers: int
    d: int
    heads: int
    kv_heads: int = 0
    head_dim: int = 0
    ffn: int = 0
    vocab: int = 32000
    gated: bool = True
    experts: int = 0
    top_k: int = 1
    expert_ffn: int = 0
    parallel_block: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("layers", "d", "heads", "vocab", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise WorkloadError(f"llm {name} must be a positive integer, not {value!r}")
        for name in ("kv_heads", "head_dim", "ffn", "experts", "expert_ffn"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise WorkloadError(f"llm {name} must be a non-negative integer, not {value!r}")
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.heads)
        if not self.head_dim:
            if self.d % self.heads:
                raise WorkloadError(f"llm d={self.d} must be divisible by heads={self.heads} (or give head_dim)")
            object.__setattr__(self, "head_dim", self.d // self.heads)
        if self.heads % self.kv_heads:
            raise WorkloadError(f"llm kv_heads={self.kv_heads} must divide heads={self.heads}")
        if self.experts:
            if not self.expert_ffn:
                raise WorkloadError("llm expert_ffn must be positive when experts > 0, not 0")
            if self.top_k > self.experts:
                raise WorkloadError(f"llm top_k must be at most experts={self.experts}, not {self.top_k}")
        elif not self.ffn:
            raise WorkloadError("llm ffn must be positive for a dense model (experts = 0), not 0")

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def attention_params(self) -> int:
        """Weights of one layer's attention: Q, K, V and output projections."""
        hd = self.head_dim
        return self.d * (self.heads + 2 * self.kv_heads) * hd + self.heads * hd * self.d

    @property
    def _mats(self) -> int:
        return 3 if self.gated else 2

    @property
    def ffn_params(self) -> int:
        """Weights of one layer's dense FFN (0 for MoE)."""
        return 0 if self.moe else self._mats * self.d * self.ffn

    @property
    def expert_params(self) -> int:
        """Weights of one layer's experts (all of them; 0 for dense)."""
        return self.experts * self._mats * self.d * self.expert_ffn if self.moe else 0

    @property
    def router_params(self) -> int:
        return self.d * self.experts if self.moe else 0

    @property
    def head_params(self) -> int:
        """The LM head (the embedding table is the same size; it is not a GEMM)."""
        return self.vocab * self.d

    @property
    def params(self) -> int:
        """All weights: layers, the embedding table and the LM head (untied)."""
        per_layer = self.attention_params + self.ffn_params + self.expert_params + self.router_params
        return self.layers * per_layer + 2 * self.head_params

    @property
    def active_matmul_params(self) -> int:
        """Weights one token multiplies with: attention, top_k experts (or the FFN), router, LM head."""
        experts = self.top_k * self._mats * self.d * self.expert_ffn if self.moe else 0
        per_layer = self.attention_params + self.ffn_params + experts + self.router_params
        return self.layers * per_layer + self.head_params

    def model_flops_per_token(self, context: int, *, training: bool) -> float:
        """Model FLOPs per token (PaLM's count): ``6 N + 12 L H Q T`` training, ``2 N + 4 L H Q T`` inference.

        ``N`` is :attr:`active_matmul_params`, ``L H Q`` layers x heads x head_dim, ``T`` the
        context the token attends to (the sequence length in training).
        """
        mult = 3 if training else 1
        return mult * (2.0 * self.active_matmul_params + 4.0 * self.layers * self.heads * self.head_dim * context)

    def with_options(self, **options: int) -> LlmShape:
        try:
            return dataclasses.replace(self, **options)  # type: ignore[arg-type]
        except TypeError as exc:
            raise WorkloadError(f"llm {self.name}: {exc}") from None


def _shapes() -> Mapping[str, LlmShape]:
    shapes = (
        LlmShape(name="llama70b", layers=80, d=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000,
                 source="LLaMA-2 70B (Touvron et al. 2023): 80 layers, d 8192, 64 heads, 8 KV heads, SwiGLU 28672"),
        LlmShape(name="llama7b", layers=32, d=4096, heads=32, ffn=11008, vocab=32000,
                 source="LLaMA-7B (Touvron et al. 2023), the llama_block builtin's shape"),
        LlmShape(name="qwen3_moe_235b", layers=94, d=4096, heads=64, kv_heads=4, head_dim=128, vocab=151936,
                 experts=128, top_k=8, expert_ffn=1536,
                 source="Qwen3-235B-A22B (Qwen3 technical report 2025, model config): 94 layers, d 4096, "
                 "64 Q / 4 KV heads of 128, 128 experts of 1536, top-8, vocab 151936"),
        LlmShape(name="qwen3_moe_30b", layers=48, d=2048, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                 experts=128, top_k=8, expert_ffn=768,
                 source="Qwen3-30B-A3B (Qwen3 technical report 2025, model config)"),
        LlmShape(name="gpt3_175b", layers=96, d=12288, heads=96, ffn=4 * 12288, vocab=51200, gated=False,
                 source="GPT-3 175B (Brown et al. 2020): 96 layers, d 12288, 96 heads, FFN 4d"),
        LlmShape(name="palm540b", layers=118, d=18432, heads=48, kv_heads=1, head_dim=256, ffn=4 * 18432,
                 vocab=256000, parallel_block=True,
                 source="PaLM 540B (Chowdhery et al. 2022, Table 1): 118 layers, d 18432, 48 heads of 256, "
                 "multi-query, SwiGLU 4d, parallel layers, vocab 256k"),
    )
    return MappingProxyType({s.name: s for s in shapes})


#: Named LLM shapes (``llm_shape(name)``); options override fields (``llama70b:layers=40``).
LLM_SHAPES: Mapping[str, LlmShape] = _shapes()

_SHAPE_OPTIONS = ("layers", "d", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "top_k", "expert_ffn")


def llm_shape(name: str) -> LlmShape:
    """The named shape; ``WorkloadError`` listing the names if there is none."""
    if name not in LLM_SHAPES:
        raise WorkloadError(f"unknown llm {name!r} (known: {', '.join(LLM_SHAPES)})")
    return LLM_SHAPES[name]


def parse_llm_spec(spec: str) -> LlmShape:
    """``NAME[:k=v,...]``: a named shape with integer fields overridden (``gpt3_175b:layers=48,d=8192``)."""
    name, _, rest = spec.partition(":")
    shape = llm_shape(name)
    options: dict[str, int] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in _SHAPE_OPTIONS:
            raise WorkloadError(f"llm option {item!r} must be KEY=INT with KEY one of {', '.join(_SHAPE_OPTIONS)}")
        number = parse_int(value.strip())
        if number is None:
            raise WorkloadError(f"llm option {key} must be an integer, not {value!r} ({INT_RULE})")
        options[key] = number
    derived = shape.head_dim * shape.heads == shape.d  # head_dim follows d / heads unless given
    if derived and "head_dim" not in options and ("d" in options or "heads" in options):
        options["head_dim"] = 0
    if ("heads" in options) and "kv_heads" not in options and shape.kv_heads == shape.heads:
        options["kv_heads"] = 0
    return shape.with_options(**options) if options else shape


def _share(total: int, parts: int) -> int:
    return -(-total // parts)


def layer_ops(shape: LlmShape, *, seqs: int, q_len: int, kv_len: int, tp: int = 1, ep: int = 1) -> list[Gemm]:
    """The forward GEMMs of one layer on one chip: ``seqs`` sequences of ``q_len`` new tokens
    attending to ``kv_len`` tokens (``kv_len = q_len`` in training and prefill), split ``tp`` ways
    (heads, FFN columns, the router's experts) and, for MoE, ``ep`` ways over experts (key/value heads fewer than
    ``tp`` are replicated). Names: ``qkv``, ``scores``, ``context``, ``out``, then ``gate``,
    ``up``, ``down`` (``router``, ``expert_gate``, ``expert_up``, ``expert_down`` for MoE)."""
    tokens = seqs * q_len
    hd = shape.head_dim
    hq = _share(shape.heads, tp)
    hkv = _share(shape.kv_heads, tp)
    ops = [
        Gemm(m=tokens, k=shape.d, n=(hq + 2 * hkv) * hd, name="qkv"),
        Gemm(m=q_len, k=hd, n=kv_len, batch=seqs * hq, name="scores"),
        Gemm(m=q_len, k=kv_len, n=hd, batch=seqs * hq, name="context"),
        Gemm(m=tokens, k=hq * hd, n=shape.d, name="out"),
    ]
    if shape.moe:
        local = shape.experts // ep
        per_expert = _share(tokens * ep * shape.top_k, shape.experts)
        width = _share(shape.expert_ffn, tp)
        ops.append(Gemm(m=tokens, k=shape.d, n=_share(shape.experts, tp), name="router"))
        if shape.gated:
            ops.append(Gemm(m=per_expert, k=shape.d, n=width, batch=local, name="expert_gate"))
        ops.append(Gemm(m=per_expert, k=shape.d, n=width, batch=local, name="expert_up"))
        ops.append(Gemm(m=per_expert, k=width, n=shape.d, batch=local, name="expert_down"))
    else:
        width = _share(shape.ffn, tp)
        if shape.gated:
            ops.append(Gemm(m=tokens, k=shape.d, n=width, name="gate"))
        ops.append(Gemm(m=tokens, k=shape.d, n=width, name="up"))
        ops.append(Gemm(m=tokens, k=width, n=shape.d, name="down"))
    return ops


def head_ops(shape: LlmShape, *, tokens: int, tp: int = 1) -> list[Gemm]:
    """The LM head on ``tokens`` tokens, its vocabulary split ``tp`` ways."""
    return [Gemm(m=tokens, k=shape.d, n=_share(shape.vocab, tp), name="lm_head")]


def backward(op: Gemm) -> list[Gemm]:
    """The two backward GEMMs of ``C = A @ B``: ``dA = dC @ B^T`` and ``dB = A^T @ dC``."""
    return [Gemm(m=op.m, k=op.n, n=op.k, batch=op.batch, name=f"{op.name}.dgrad"),
            Gemm(m=op.k, k=op.m, n=op.n, batch=op.batch, name=f"{op.name}.wgrad")]


def check_split(shape: LlmShape, *, tp: int, pp: int, ep: int) -> str:
    """Why ``tp``/``pp``/``ep`` cannot cut ``shape`` (``""`` if they can): each must divide what it splits."""
    if shape.heads % tp:
        return f"tp={tp} must divide the model's heads ({shape.heads})"
    width = shape.expert_ffn if shape.moe else shape.ffn
    if width % tp:
        return f"tp={tp} must divide the model's FFN width ({width})"
    if shape.layers % pp:
        return f"pp={pp} must divide the model's layers ({shape.layers})"
    if ep > 1 and not shape.moe:
        return f"ep={ep} needs a mixture-of-experts model (this one is dense)"
    if shape.moe and shape.experts % ep:
        return f"ep={ep} must divide the model's experts ({shape.experts})"
    return ""


def whole_model_macs(shape: LlmShape, *, seqs: int, seq: int) -> int:
    """MACs of one forward pass of the whole (unsplit) model on ``seqs`` sequences, LM head included."""
    ops = layer_ops(shape, seqs=seqs, q_len=seq, kv_len=seq)
    return shape.layers * sum(op.macs for op in ops) + sum(op.macs for op in head_ops(shape, tokens=seqs * seq))



#: What an :class:`LlmJob` does: a training step, or serving (prefill, then decode).
MODES = ("train", "serve")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LlmJob:
    """One LLM job on a system: a training step, or serving a batch of requests.

    Attributes:
        shape: the model.
        mode: ``"train"`` (forward, backward, optimizer update of one global batch) or
            ``"serve"`` (prefill of the prompts, then ``gen`` decode steps against the KV cache).
        batch: sequences in the global batch (training) or served at once (serving).
        seq: tokens per sequence (training) or per prompt (serving).
        gen: tokens generated per sequence (serving; at least 1).
        fused_attention: attention scores stay on chip (FlashAttention-style): no ``seq x seq``
            softmax traffic to HBM and no stored scores; ``False`` materialises them.
    """

    shape: LlmShape
    mode: str = "train"
    batch: int = 1
    seq: int = 2048
    gen: int = 1
    fused_attention: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.shape, LlmShape):
            raise WorkloadError(f"llm job shape must be an LlmShape, not {self.shape!r}")
        if self.mode not in MODES:
            raise WorkloadError(f"llm job mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for name in ("batch", "seq", "gen"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise WorkloadError(f"llm job {name} must be a positive integer, not {value!r}")
        if not isinstance(self.fused_attention, bool):
            raise WorkloadError(f"llm job fused_attention must be true or false, not {self.fused_attention!r}")

    @property
    def training(self) -> bool:
        return self.mode == "train"

    @property
    def name(self) -> str:
        extra = f",gen={self.gen}" if not self.training else ""
        return f"{self.shape.name} {self.mode} batch={self.batch},seq={self.seq}{extra}"


__all__ += ["LlmJob", "MODES"]

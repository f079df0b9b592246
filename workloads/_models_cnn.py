"""Convolutional builtins: ResNet-18, MobileNetV2 and AlexNet (ImageNet layer shapes, NHWC, no batch norm).

Layer shapes follow the published architectures: ResNet-18 from He et al., "Deep Residual
Learning for Image Recognition" (CVPR 2016), Table 1 (basic blocks, 1x1 stride-2 projection
shortcuts); MobileNetV2 from Sandler et al., "MobileNetV2: Inverted Residuals and Linear
Bottlenecks" (CVPR 2018), Table 2 (width 1.0; depthwise convs are grouped convs with
``groups == channels``); AlexNet as in torchvision (the single-tower variant of Krizhevsky et
al., "One weird trick for parallelizing convolutional neural networks", 2014: 64, 192, 384,
256, 256 filters), without the adaptive pooling (at 224 its 6 x 6 map is already that size;
at other resolutions the first classifier layer takes whatever map is left). ResNet and
MobileNet pad symmetrically by ``(k - 1) / 2`` as the common reference implementations do;
AlexNet pads 2, 2, 1, 1, 1 as torchvision does. Batch norm is omitted (it folds into the conv weights at inference).
"""

from __future__ import annotations

from typing import Any

import jax

from workloads._layers import Form, ParamMaker
from workloads._model import Model

__all__ = ["resnet18", "mobilenet_v2", "alexnet"]

# AlexNet features: (kernel, output channels, stride, pad, max-pool after it).
_ALEXNET_CONVS = ((11, 64, 4, 2, True), (5, 192, 1, 2, True), (3, 384, 1, 1, False), (3, 256, 1, 1, False),
                  (3, 256, 1, 1, True))
_ALEXNET_HIDDEN = 4096

_RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, first stride), 2 blocks each

# MobileNetV2 bottlenecks: (expansion t, output channels c, repeats n, first stride s).
_MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)


def _conv_w(pm: ParamMaker, k: int, c_in: int, c_out: int) -> jax.Array:
    return pm.weight((k, k, c_in, c_out), k * k * c_in)


def resnet18(form: Form, *, batch: int, res: int, classes: int) -> Model:
    """ResNet-18 on ``batch`` ``res x res x 3`` images, ``classes``-way classifier."""

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        params: dict[str, Any] = {"conv1": _conv_w(pm, 7, 3, 64)}
        c_in = 64
        for s, (c, stride) in enumerate(_RESNET18_STAGES, start=1):
            for b in range(2):
                block = {"conv1": _conv_w(pm, 3, c_in, c), "conv2": _conv_w(pm, 3, c, c)}
                if b == 0 and (stride != 1 or c_in != c):
                    block["downsample"] = _conv_w(pm, 1, c_in, c)
                params[f"layer{s}.{b}"] = block
                c_in = c
        params["fc"] = pm.weight((512, classes), 512)
        return params, pm.activation((batch, res, res, 3))

    def fn(params: dict[str, Any], x: jax.Array) -> jax.Array:
        with jax.named_scope("conv1"):
            x = form.conv(x, params["conv1"], stride=2, pad=3, activation="relu")
        x = form.maxpool(x, window=3, stride=2, pad=1)
        for s, (_, stride) in enumerate(_RESNET18_STAGES, start=1):
            for b in range(2):
                name = f"layer{s}.{b}"
                block = params[name]
                st = stride if b == 0 else 1
                with jax.named_scope(f"{name}.conv1"):
                    y = form.conv(x, block["conv1"], stride=st, pad=1, activation="relu")
                with jax.named_scope(f"{name}.conv2"):
                    y = form.conv(y, block["conv2"], pad=1)
                if "downsample" in block:
                    with jax.named_scope(f"{name}.downsample"):
                        x = form.conv(x, block["downsample"], stride=st)
                x = form.relu(form.add(x, y))
        x = form.global_avgpool(x)
        with jax.named_scope("fc"):
            return form.dense(x, params["fc"])

    return Model(fn, make_args)


def mobilenet_v2(form: Form, *, batch: int, res: int, classes: int) -> Model:
    """MobileNetV2 (width 1.0) on ``batch`` ``res x res x 3`` images, ``classes``-way classifier."""

    def layout() -> list[tuple[str, int, int, int, int]]:
        """(name, c_in, hidden, c_out, stride) of every bottleneck."""
        blocks, c_in, i = [], 32, 1
        for t, c, n, s in _MOBILENET_V2_BLOCKS:
            for r in range(n):
                blocks.append((f"features.{i}", c_in, c_in * t, c, s if r == 0 else 1))
                c_in, i = c, i + 1
        return blocks

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        params: dict[str, Any] = {"features.0": _conv_w(pm, 3, 3, 32)}
        for name, c_in, hidden, c_out, _ in layout():
            block = {}
            if hidden != c_in:
                block["expand"] = _conv_w(pm, 1, c_in, hidden)
            block["depthwise"] = pm.weight((3, 3, 1, hidden), 9)
            block["project"] = _conv_w(pm, 1, hidden, c_out)
            params[name] = block
        params["features.18"] = _conv_w(pm, 1, 320, 1280)
        params["classifier"] = pm.weight((1280, classes), 1280)
        return params, pm.activation((batch, res, res, 3))

    def fn(params: dict[str, Any], x: jax.Array) -> jax.Array:
        with jax.named_scope("features.0"):
            x = form.conv(x, params["features.0"], stride=2, pad=1, activation="relu6")
        for name, c_in, hidden, c_out, stride in layout():
            block = params[name]
            y = x
            if "expand" in block:
                with jax.named_scope(f"{name}.expand"):
                    y = form.conv(y, block["expand"], activation="relu6")
            with jax.named_scope(f"{name}.depthwise"):
                y = form.conv(y, block["depthwise"], stride=stride, pad=1, groups=hidden, activation="relu6")
            with jax.named_scope(f"{name}.project"):
                y = form.conv(y, block["project"])
            x = form.add(x, y) if stride == 1 and c_in == c_out else y
        with jax.named_scope("features.18"):
            x = form.conv(x, params["features.18"], activation="relu6")
        x = form.global_avgpool(x)
        with jax.named_scope("classifier"):
            return form.dense(x, params["classifier"])

    return Model(fn, make_args)


def _alexnet_map(res: int) -> int:
    """Side of AlexNet's last feature map for ``res x res`` inputs (in pixels)."""
    size = res
    for k, _, stride, pad, pool in _ALEXNET_CONVS:
        size = (size + 2 * pad - k) // stride + 1
        if pool:
            size = (size - 3) // 2 + 1
    return size


def alexnet(form: Form, *, batch: int, res: int, classes: int) -> Model:
    """AlexNet (torchvision's single-tower layers) on ``batch`` ``res x res x 3`` images."""
    side = _alexnet_map(res)

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        params: dict[str, Any] = {}
        c_in = 3
        for i, (k, c, _, _, _) in enumerate(_ALEXNET_CONVS):
            params[f"features.conv{i + 1}"] = _conv_w(pm, k, c_in, c)
            c_in = c
        flat = side * side * c_in
        params["classifier.fc1"] = pm.weight((flat, _ALEXNET_HIDDEN), flat)
        params["classifier.fc2"] = pm.weight((_ALEXNET_HIDDEN, _ALEXNET_HIDDEN), _ALEXNET_HIDDEN)
        params["classifier.fc3"] = pm.weight((_ALEXNET_HIDDEN, classes), _ALEXNET_HIDDEN)
        return params, pm.activation((batch, res, res, 3))

    def fn(params: dict[str, Any], x: jax.Array) -> jax.Array:
        for i, (_, _, stride, pad, pool) in enumerate(_ALEXNET_CONVS):
            name = f"features.conv{i + 1}"
            with jax.named_scope(name):
                x = form.conv(x, params[name], stride=stride, pad=pad, activation="relu")
            if pool:
                x = form.maxpool(x, window=3, stride=2, pad=0)
        x = x.reshape(x.shape[0], -1)
        for name in ("classifier.fc1", "classifier.fc2"):
            with jax.named_scope(name):
                x = form.dense(x, params[name], activation="relu")
        with jax.named_scope("classifier.fc3"):
            return form.dense(x, params["classifier.fc3"])

    return Model(fn, make_args)

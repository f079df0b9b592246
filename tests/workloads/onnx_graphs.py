"""Shape-only ONNX graphs built with ``onnx.helper`` for the tests (no downloads, no weights).

Every weight is an initializer whose data lives in an external file that does not exist
(``weights.bin``), as in a model zoo file whose weights were stripped: only the dims are
there. Layouts are ONNX's (NCHW activations, OIHW conv weights, ``(out, in)`` Gemm weights
with ``transB=1`` as PyTorch exports ``nn.Linear``). The layer lists follow torchvision's
definitions, written out here independently of the builtin JAX models they are compared to.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper


def stripped_weight(name: str, dims: list[int]) -> TensorProto:
    """An int8 initializer of ``dims`` whose data is in an absent external file."""
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.INT8
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(max(1, _prod(dims))))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def _prod(dims: list[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


class GraphBuilder:
    """Appends nodes and stripped initializers; :meth:`save` writes the model."""

    def __init__(self, input_shape: list[int | str], opset: int = 17) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[TensorProto] = []
        self.input = helper.make_tensor_value_info("input", TensorProto.FLOAT, input_shape)
        self.opset = opset
        self._n = 0

    def _out(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_out{self._n}"

    def node(self, op: str, inputs: list[str], name: str = "", **attrs: object) -> str:
        out = self._out(name or op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def weight(self, name: str, dims: list[int]) -> str:
        self.weights.append(stripped_weight(name, dims))
        return name

    def conv(self, x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int = 0,
             groups: int = 1) -> str:
        w = self.weight(f"{name}.weight", [c_out, c_in // groups, k, k])
        return self.node("Conv", [x, w], name, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad, pad, pad, pad], group=groups)

    def linear(self, x: str, name: str, d_in: int, d_out: int) -> str:
        w = self.weight(f"{name}.weight", [d_out, d_in])
        return self.node("Gemm", [x, w], name, transB=1)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def relu6(self, x: str) -> str:
        lo = self.weight_const("zero")
        hi = self.weight_const("six")
        return self.node("Clip", [x, lo, hi])

    def weight_const(self, name: str) -> str:
        if not any(t.name == name for t in self.weights):
            self.weights.append(helper.make_tensor(name, TensorProto.FLOAT, [], [0.0 if name == "zero" else 6.0]))
        return name

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0) -> str:
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def save(self, path: Path, out: str, name: str) -> Path:
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, name, [self.input], [y], initializer=self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="accel-dse tests")
        onnx.save(model, str(path))
        return path


def resnet18(path: Path, batch: int | str = "N", res: int = 224, classes: int = 1000) -> Path:
    """torchvision ResNet-18 (batch norm folded away)."""
    g = GraphBuilder([batch, 3, res, res])
    x = g.relu(g.conv("input", "conv1", 3, 64, 7, stride=2, pad=3))
    x = g.maxpool(x, 3, 2, 1)
    c_in = 64
    for stage, (c, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
        for block in range(2):
            s = stride if block == 0 else 1
            prefix = f"layer{stage}.{block}"
            y = g.relu(g.conv(x, f"{prefix}.conv1", c_in, c, 3, stride=s, pad=1))
            y = g.conv(y, f"{prefix}.conv2", c, c, 3, pad=1)
            if s != 1 or c_in != c:
                x = g.conv(x, f"{prefix}.downsample.0", c_in, c, 1, stride=s)
            x = g.relu(g.node("Add", [x, y]))
            c_in = c
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    return g.save(path, g.linear(x, "fc", 512, classes), "resnet18")


def mobilenet_v2(path: Path, batch: int | str = "N", res: int = 224, classes: int = 1000) -> Path:
    """torchvision MobileNetV2 (width 1.0, batch norm folded away, dropout dropped)."""
    g = GraphBuilder([batch, 3, res, res])
    x = g.relu6(g.conv("input", "features.0.0", 3, 32, 3, stride=2, pad=1))
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]
    c_in, index = 32, 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            prefix = f"features.{index}.conv"
            y = x
            if t != 1:
                y = g.relu6(g.conv(y, f"{prefix}.0.0", c_in, hidden, 1))
            y = g.relu6(g.conv(y, f"{prefix}.1.0", hidden, hidden, 3, stride=stride, pad=1, groups=hidden))
            y = g.conv(y, f"{prefix}.2", hidden, c, 1)
            x = g.node("Add", [x, y]) if stride == 1 and c_in == c else y
            c_in, index = c, index + 1
    x = g.relu6(g.conv(x, "features.18.0", 320, 1280, 1))
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    return g.save(path, g.linear(x, "classifier.1", 1280, classes), "mobilenet_v2")


def alexnet(path: Path, batch: int | str = "N", res: int = 224, classes: int = 1000) -> Path:
    """torchvision AlexNet at 224 (its adaptive pool is the identity there, so it is left out)."""
    g = GraphBuilder([batch, 3, res, res])
    x = g.maxpool(g.relu(g.conv("input", "features.0", 3, 64, 11, stride=4, pad=2)), 3, 2)
    x = g.maxpool(g.relu(g.conv(x, "features.3", 64, 192, 5, pad=2)), 3, 2)
    x = g.relu(g.conv(x, "features.6", 192, 384, 3, pad=1))
    x = g.relu(g.conv(x, "features.8", 384, 256, 3, pad=1))
    x = g.maxpool(g.relu(g.conv(x, "features.10", 256, 256, 3, pad=1)), 3, 2)
    x = g.node("Flatten", [x])
    x = g.relu(g.linear(x, "classifier.1", 256 * 6 * 6, 4096))
    x = g.relu(g.linear(x, "classifier.4", 4096, 4096))
    return g.save(path, g.linear(x, "classifier.6", 4096, classes), "alexnet")


def attention_mix(path: Path, batch: int = 1, seq: int = 8, d: int = 16) -> Path:
    """A small transformer-shaped graph with the vector ops ONNX import maps to records:
    ``h = LayerNorm(x + (x @ W + bias))``, ``p = Softmax(h @ Ws)`` (seq x seq), ``y = Gelu(p @ Wv)``."""
    g = GraphBuilder([batch, seq, d], opset=20)
    proj = g.node("MatMul", ["input", g.weight("w", [d, d])], "proj")
    biased = g.node("Add", [proj, g.weight("bias", [d])], "bias_add")
    res = g.node("Add", ["input", biased], "residual")
    h = g.node("LayerNormalization", [res, g.weight("ln.scale", [d]), g.weight("ln.bias", [d])], "ln",
               axis=-1, epsilon=1e-5)
    scores = g.node("MatMul", [h, g.weight("ws", [d, seq])], "scores")
    probs = g.node("Softmax", [scores], "softmax", axis=-1)
    ctx = g.node("MatMul", [probs, g.weight("wv", [seq, d])], "context")
    return g.save(path, g.node("Gelu", [ctx], "gelu"), "attention_mix")

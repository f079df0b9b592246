"""ResNet-18 as torchvision builds it (``torchvision.models.resnet18``: the basic blocks, a 1x1
downsample with batch norm where the stride or width changes, the 7x7/2 stem and 3x3/2 max pool),
written here in plain PyTorch: torchvision's wheels need another torch than the CPU build this
project installs. ``resnet18()`` is a ``file.py:fn`` workload: the module and its input on ``meta``."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU()
        self.downsample = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                           if stride != 1 or c_in != c_out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + identity)


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in, layers = 64, []
        for i, c in enumerate((64, 128, 256, 512)):
            layers.append(nn.Sequential(BasicBlock(c_in, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)))
            c_in = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-18 in eval mode on ``meta`` (no weights) and a 1x3x224x224 input."""
    with torch.device("meta"):
        return ResNet18().eval(), (torch.empty(1, 3, 224, 224),)

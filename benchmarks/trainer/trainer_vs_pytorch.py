"""PyTorch side of trainer_vs_pytorch: the same vgg11 / resnet20 as gradsync's trainer
(trainer/src/models.cpp, at any --width, initialized alike) on 1x28x28, forward + cross-entropy + backward, best
seconds per batch. Prints one "name wall_seconds cpu_seconds" line per model (process CPU time: robust on a
shared machine), after a "# PyTorch ..., <BLAS> ..." line (../torch_blas.py)."""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_blas  # noqa: E402


def scaled(base, width):
    """Channels at a width multiplier, rounded as the trainer's Builder::scaled (std::lround, at least 1)."""
    return max(1, math.floor(base * width + 0.5))


def init_like_trainer(model):
    """gradsync's initialization (trainer/src/conv.cpp, layers.cpp): convolutions Kaiming-normal
    (fan out), linear weights normal with std 1/sqrt(in), biases zero; batch norm as torch's."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / (m.out_channels * m.kernel_size[0] * m.kernel_size[1])))
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 1.0 / math.sqrt(m.in_features))
        else:
            continue
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    return model


def vgg11(classes=10, size=28, width=1.0, channels=1):
    layers, c, h = [], channels, size
    for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        if v == "M":
            if h >= 4:  # gradsync skips a pool once the map is under 4x4
                layers.append(nn.MaxPool2d(2, 2))
                h //= 2
            continue
        v = scaled(v, width)
        layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
        c = v
    hidden = scaled(4096, width)
    return init_like_trainer(nn.Sequential(*layers, nn.Flatten(), nn.Linear(c * h * h, hidden), nn.ReLU(True),
                                           nn.Dropout(0.5), nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(0.5),
                                           nn.Linear(hidden, classes)))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


def resnet20(classes=10, channels=1, width=1.0):
    c = scaled(16, width)
    layers = [nn.Conv2d(channels, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(True)]
    for stage, planes in enumerate(scaled(p, width) for p in [16, 32, 64]):
        for i in range(3):
            layers.append(Block(c, planes, 2 if i == 0 and stage > 0 else 1))
            c = planes
    return init_like_trainer(nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="vgg11,resnet20")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    # OpenBLAS, not the reference BLAS, with its threads set (installs it when missing): read by
    # trainer_vs_pytorch.cpp, which prints '#' lines above its table
    print("#", torch_blas.summary(torch_blas.require(a.threads)), flush=True)
    torch.manual_seed(1)
    for name in a.models.split(","):
        model = {"vgg11": vgg11, "resnet20": resnet20}[name]()
        model.train()
        x = torch.randn(a.batch, 1, 28, 28)
        y = torch.arange(a.batch) % 10
        walls, cpus = [], []
        for r in range(a.reps + 2):
            t0, c0 = time.perf_counter(), time.process_time()
            model.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            if r >= 2:
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        print(name, min(walls), min(cpus), flush=True)


if __name__ == "__main__":
    main()

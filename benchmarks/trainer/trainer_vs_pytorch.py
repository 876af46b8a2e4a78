"""PyTorch side of trainer_vs_pytorch: the same vgg11 / resnet20 / alexnet-bn / lstm as gradsync's
trainer (trainer/src/models.cpp, at any --width) on 1x28x28, forward + cross-entropy + backward,
best seconds per batch, for each thread count.
Prints "blas <library> <GFLOP/s>" first (the BLAS torch loaded and a 1-thread 1024^3 matmul's rate:
Debian's torch takes whichever libblas.so.3 the alternatives point to; only OpenBLAS is a fair
peer), then one "name threads wall_seconds cpu_seconds" line per model and thread count (process
CPU time: robust on a shared machine)."""
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


def alexnet_bn(classes=10, size=28, width=1.0):
    """The trainer's small-input AlexNet-BN: 5x5 stride-1 first convolution, batch norm after every
    convolution and after pool5, a pool skipped when the map is under its 3x3 window."""
    layers, c, h = [], 1, size

    def conv_bn(out, k, p):
        nonlocal c
        out = scaled(out, width)
        layers.extend([nn.Conv2d(c, out, k, 1, p, bias=False), nn.BatchNorm2d(out), nn.ReLU(True)])
        c = out

    def pool():
        nonlocal h
        if h >= 3:
            layers.append(nn.MaxPool2d(3, 2))
            h = (h - 3) // 2 + 1

    conv_bn(64, 5, 2)
    pool()
    conv_bn(192, 5, 2)
    pool()
    conv_bn(384, 3, 1)
    conv_bn(256, 3, 1)
    conv_bn(256, 3, 1)
    pool()
    hidden = scaled(4096, width)
    return init_like_trainer(nn.Sequential(*layers, nn.BatchNorm2d(c), nn.Flatten(), nn.Dropout(0.5),
                                           nn.Linear(c * h * h, hidden), nn.ReLU(True), nn.Dropout(0.5),
                                           nn.Linear(hidden, hidden), nn.ReLU(True), nn.Linear(hidden, classes)))


class LstmClassifier(nn.Module):
    """The trainer's lstm: image rows as time steps, one LSTM layer, the last step's hidden state."""

    def __init__(self, classes=10, size=28, width=1.0):
        super().__init__()
        hidden = scaled(128, width)
        self.lstm = nn.LSTM(size, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(x.permute(0, 2, 1, 3).flatten(2))  # [N, C, H, W] -> [N, H, C*W]
        return self.fc(out[:, -1])


MODELS = {"vgg11": vgg11, "resnet20": resnet20, "alexnet-bn": alexnet_bn, "lstm": LstmClassifier}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet20,vgg11,alexnet-bn,lstm")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    # OpenBLAS, not the reference BLAS, on its best kernels (installs it when missing; exits naming
    # the fix otherwise): the library and its 1-thread matmul rate head trainer_vs_pytorch's table
    record = torch_blas.require(1)
    print("#", torch_blas.summary(record), file=sys.stderr, flush=True)
    print("blas", record["blas_library"], record["matmul_gflops_1thread"], flush=True)
    for threads in (int(t) for t in a.threads.split(",")):
        torch.set_num_threads(threads)
        torch_blas.blas_threads(record["blas_library"], threads)  # torch.set_num_threads does not reach it
        for name in a.models.split(","):
            torch.manual_seed(1)
            model = MODELS[name]()
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
            print(name, threads, min(walls), min(cpus), flush=True)


if __name__ == "__main__":
    main()

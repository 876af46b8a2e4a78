"""PyTorch reference for benchmarks/gpu/run.sh: the trainer's models (benchmarks/trainer/trainer_vs_pytorch.py,
equal to trainer/src/models.cpp) on synthetic 3x32x32 images, batch 128, SGD with momentum on one GPU, as
gradsync-train-cuda runs them. PyTorch at its fastest: torch.backends.cudnn.benchmark on (cuDNN's algorithms
timed per shape, as gradsync's cudnnFind), the batch already on the GPU.

Prints one line per model (--models, default resnet20; pytorch_vgg11.py is the VGG-11 twin):
"model fp32 tf32 amp", images/s = batch / the median iteration time of 200 iterations after 30 warm-up
ones, each iteration timed by CUDA events on the stream (no synchronization inside the loop):
  fp32  fp32 arithmetic throughout (cudnn.allow_tf32 off), as gradsync-train-cuda --precision fp32;
  tf32  PyTorch's default, TF32 tensor cores in the convolutions (10-bit inputs);
  amp   fp16 autocast, fp32 master weights, dynamic loss scaling, as --precision mixed."""
import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainer"))
from trainer_vs_pytorch import resnet20, vgg11  # noqa: E402

MODELS = {"resnet20": lambda: resnet20(10, channels=3), "vgg11": lambda: vgg11(10, size=32, channels=3)}


def images_per_second(name, amp, tf32, batch=128, warmup=30, iterations=200):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(1)
    model = MODELS[name]().cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    x = torch.randn(batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        step()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(iterations + 1)]
    marks[0].record()
    for i in range(iterations):
        step()
        marks[i + 1].record()
    torch.cuda.synchronize()
    seconds = statistics.median(a.elapsed_time(b) for a, b in zip(marks, marks[1:])) / 1000
    return round(batch / seconds)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet20", help="comma-separated: " + ", ".join(MODELS))
    for name in ap.parse_args(argv).models.split(","):
        rates = [images_per_second(name, amp, tf32) for amp, tf32 in [(False, False), (False, True), (True, True)]]
        print(name, *rates, flush=True)


if __name__ == "__main__":
    main()

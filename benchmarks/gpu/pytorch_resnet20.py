"""PyTorch reference for benchmarks/gpu/run.sh: the trainer's ResNet-20 (trainer_vs_pytorch.py) on
synthetic 3x32x32 images, batch 128, SGD with momentum on one GPU, as gradsync-train-cuda runs it.
Prints images/s for fp32 and for AMP (fp16 autocast, fp32 masters, dynamic loss scaling)."""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainer"))
from trainer_vs_pytorch import resnet20  # noqa: E402


def images_per_second(amp, batch=128, iterations=200):
    torch.manual_seed(1)
    model = resnet20(10, channels=3).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
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

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iterations):
        step()
    torch.cuda.synchronize()
    return batch * iterations / (time.perf_counter() - t0)


if __name__ == "__main__":
    print(round(images_per_second(False)), round(images_per_second(True)))

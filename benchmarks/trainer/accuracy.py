"""PyTorch side of `trainer_vs_pytorch --accuracy` (accuracy.cpp): trains the PyTorch replica of one
of gradsync-train's models (trainer_vs_pytorch.py's definitions) on Fashion-MNIST with the
trainer's recipe, then tests it on the whole test set; prints one JSON line.

The recipe is the trainer's (trainer/src/optimizer.cpp, rank_loop.cpp, data.cpp), in PyTorch's terms:
  - data: the IDX files gradsync-train reads, pixels (x / 255 - 0.2860) / 0.3530 as it computes
    them; each epoch a random order, full batches only (the last partial batch dropped);
  - SGD (torch.optim.SGD: v = m v + g + wd w; w -= lr v), weight decay on convolution, linear and
    LSTM weights only (not on biases or batch norm), the learning rate set every iteration:
    linear warm-up then cosine to 0 over the run (LrSchedule);
  - mean cross-entropy; batch norm momentum 0.1, eps 1e-5, running statistics at test time;
  - initialization: trainer_vs_pytorch.py's init_like_trainer, and the trainer's LSTM (one bias,
    uniform +-1/sqrt(hidden): bias_hh zero and frozen).
With --start DIR (written by accuracy.cpp from the trainer's own model) it begins from the trainer's
initial weights and reads each epoch's order from there: the two sides then differ only in their
arithmetic (and dropout's draws), not in their draws of weights and order.

  accuracy.py --model resnet20 --seed 1 [--epochs 1 | --iterations N] [--batch 64] [--lr 0.1]
              [--schedule cosine] [--warmup 0] [--momentum 0.9] [--wd 5e-4] [--width 1]
              [--threads 2] [--data-dir DIR] [--start DIR] [--losses FILE]
"""
import argparse
import gzip
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

# PyTorch's OpenMP threads spin while they wait: on a shared machine that made its ResNet-20 step
# 7x slower (3.25 s against 0.48 s, 2 threads, load ~5). Results do not depend on it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainer_vs_pytorch as replica  # noqa: E402  (the models)

MEAN, STD = 0.2860, 0.3530  # trainer/include/gradsync/trainer/data.hpp


def read_idx(images, labels):
    """Fashion-MNIST as the trainer normalizes it: float32(p) * (1 / (255 std)) - mean / std."""
    with gzip.open(images, "rb") as f:
        raw = f.read()
    n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    pixels = np.frombuffer(raw, dtype=np.uint8, offset=16, count=n * rows * cols).astype(np.float32)
    scale = np.float32(1.0) / (np.float32(255.0) * np.float32(STD))
    shift = np.float32(MEAN) / np.float32(STD)
    x = (pixels * scale - shift).reshape(n, 1, rows, cols)
    with gzip.open(labels, "rb") as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.copy())


def load(data_dir, train):
    p = os.path.join(data_dir, "train-" if train else "t10k-")
    return read_idx(p + "images-idx3-ubyte.gz", p + "labels-idx1-ubyte.gz")


def build(name, width):
    if name == "lstm":
        model = replica.LstmClassifier(width=width)
        replica.init_like_trainer(model)
        with torch.no_grad():  # the trainer's LSTM has one bias (PyTorch's default draw for it): the
            model.lstm.bias_hh_l0.zero_()  # second stays zero and untrained (it would double the
        model.lstm.bias_hh_l0.requires_grad_(False)  # bias's step: both get the same gradient)
        return model
    return {"resnet20": replica.resnet20, "vgg11": replica.vgg11, "alexnet-bn": replica.alexnet_bn}[name](width=width)


def decays(name, tensor):
    """The trainer's rule: weight decay on weights of convolutions, linear layers and LSTMs."""
    return tensor.dim() > 1


def load_start(model, start):
    """The trainer's initial parameters (start/weights.json + weights.f32, forward order). Its LSTM's
    one bias goes to bias_ih (bias_hh stays zero). Returns each parameter's decay flag."""
    with open(os.path.join(start, "weights.json")) as f:
        meta = json.load(f)
    flat = np.fromfile(os.path.join(start, "weights.f32"), dtype=np.float32)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if len(named) != len(meta["params"]):
        raise SystemExit(f"--start: {len(meta['params'])} trainer tensors for {len(named)} PyTorch ones")
    flags, at = {}, 0
    with torch.no_grad():
        for (name, p), t in zip(named, meta["params"]):
            if list(p.shape) != t["shape"]:
                raise SystemExit(f"--start: {t['name']} {t['shape']} against {name} {list(p.shape)}")
            count = p.numel()
            p.copy_(torch.from_numpy(flat[at:at + count].copy()).view_as(p))
            at += count
            flags[name] = bool(t["decay"])
    if at != flat.size:
        raise SystemExit(f"--start: weights.f32 holds {flat.size} values, the model {at}")
    return flags


def warmup_iterations(a, bpe):
    """The warm-up's iterations, rounded as the trainer rounds them (std::lround)."""
    return math.floor(a.warmup * bpe + 0.5)


def lr_at(it, a, warmup, total):
    """LrSchedule::operator() (trainer/src/optimizer.cpp)."""
    if it < warmup:
        return a.lr * (it + 1) / warmup
    p = min(1.0, (it - warmup) / max(1, total - min(total, warmup)))
    if a.schedule == "step":
        return a.lr * 0.1 ** ((p >= 0.5) + (p >= 0.75))
    if a.schedule == "cosine":
        return a.lr * 0.5 * (1.0 + math.cos(3.14159265358979 * p))
    if a.schedule == "poly":
        return a.lr * (1.0 - p) ** 2
    return a.lr


def evaluate(model, x, y, batch=500):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            out = model(x[i:i + batch])
            loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return loss / len(y), correct / len(y)


def context():
    """The machine and the software, recorded with every result."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    git = lambda *args: subprocess.run(["git", "-C", root, *args], capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "commit": git("rev-parse", "HEAD") or "unknown", "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "tree_changed": bool(git("status", "--porcelain", "--untracked-files=no"))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet20", choices=["resnet20", "vgg11", "alexnet-bn", "lstm"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=0, help="> 0: this many iterations instead of epochs")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--schedule", default="cosine", choices=["constant", "step", "cosine", "poly"])
    ap.add_argument("--warmup", type=float, default=0.0, help="linear warm-up, in epochs")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--start", help="the trainer's initial weights and data order (accuracy.cpp --same-start)")
    ap.add_argument("--losses", help="write each iteration's training loss here, one a line")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x, y = load(a.data_dir, True)
    tx, ty = load(a.data_dir, False)
    model = build(a.model, a.width)
    flags = load_start(model, a.start) if a.start else {n: decays(n, p) for n, p in model.named_parameters()}
    named = {n: p for n, p in model.named_parameters() if p.requires_grad}
    groups = [{"params": [named[n] for n in named if flags.get(n, False)], "weight_decay": a.wd},
              {"params": [named[n] for n in named if not flags.get(n, False)], "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum)
    bpe = len(y) // a.batch
    total = a.iterations or a.epochs * bpe
    warmup = warmup_iterations(a, bpe)
    order = torch.Generator().manual_seed(a.seed)
    losses, seconds, perm, perm_epoch = [], 0.0, None, -1
    model.train()
    for it in range(total):
        epoch, index = divmod(it, bpe)
        if epoch != perm_epoch:
            if a.start:
                perm = torch.from_numpy(np.fromfile(os.path.join(a.start, f"order{epoch}.u32"),
                                                    dtype=np.uint32).astype(np.int64))
            else:
                perm = torch.randperm(len(y), generator=order)
            perm_epoch = epoch
        t0 = time.perf_counter()
        idx = perm[index * a.batch:(index + 1) * a.batch]
        for g in opt.param_groups:
            g["lr"] = lr_at(it, a, warmup, total)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        seconds += time.perf_counter() - t0
        losses.append(loss.item())
    test_loss, test_accuracy = evaluate(model, tx, ty)
    if a.losses:
        with open(a.losses, "w") as f:
            f.writelines(f"{v:.6f}\n" for v in losses)
    print(json.dumps({"side": "pytorch", "model": a.model, "seed": a.seed, "iterations": total,
                      "test_accuracy": test_accuracy, "test_loss": test_loss, "train_seconds": round(seconds, 3),
                      "final_train_loss": sum(losses[-50:]) / len(losses[-50:]), "same_start": bool(a.start),
                      "threads": a.threads, **context()}), flush=True)


if __name__ == "__main__":
    main()

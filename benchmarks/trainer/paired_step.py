"""PyTorch side of `trainer_vs_pytorch --accuracy --paired-step K` (paired_step.cpp): is one step of
the trainer PyTorch's step? Given the trainer's start (weights, order) and its state before and after
iteration K-1 of a run, with that iteration's gradients, PyTorch
  - takes iteration K-1 from the trainer's state (weights, momentum, running statistics) in fp32
    and in fp64, and compares gradients, weights, momentum and running statistics after the step;
  - runs iterations 0..K-1 from the trainer's start in fp32 and in fp64, and compares the weights
    (how fast fp32 arithmetic alone moves a run off its fp64 path);
  - tests the trainer's state after the K iterations (weights, running statistics) on the whole
    test set in eval mode, for the trainer's own evaluation of it (paired_step.cpp) to match.
Differences are relative (||a - b|| / ||b||, b the fp64 result) per parameter tensor or buffer; the
line gives their median and maximum, the trainer's and PyTorch fp32's side by side. Prints one JSON line.

  paired_step.py --start DIR --steps K [accuracy.py's recipe options]
"""
import argparse
import copy
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy  # noqa: E402  (sets OMP_WAIT_POLICY before torch loads)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def tensors(pairs, path):
    """The trainer's file at path, split as pairs' tensors (float64 arrays)."""
    flat = np.fromfile(path, dtype=np.float32).astype(np.float64)
    out, at = [], 0
    for _, t in pairs:
        out.append(flat[at:at + t.numel()])
        at += t.numel()
    if at != flat.size:
        raise SystemExit(f"{path}: {flat.size} values for {at}")
    return out


class Side:
    """One PyTorch replica (fp32 or fp64) with the trainer's optimizer groups."""

    def __init__(self, model, flags, a, dtype):
        self.model, self.dtype, self.a = copy.deepcopy(model).to(dtype), dtype, a
        self.params = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        self.buffers = [(n, b) for n, b in self.model.named_buffers() if "running" in n]
        self.opt = torch.optim.SGD([{"params": [p for n, p in self.params if flags[n]], "weight_decay": a.wd},
                                    {"params": [p for n, p in self.params if not flags[n]], "weight_decay": 0.0}],
                                   lr=a.lr, momentum=a.momentum)

    def load(self, weights, velocity, buffers):
        with torch.no_grad():
            for (_, p), w, v in zip(self.params, weights, velocity):
                p.copy_(torch.from_numpy(w).view_as(p))
                self.opt.state[p]["momentum_buffer"] = torch.from_numpy(v).to(self.dtype).view_as(p).clone()
            for (_, b), v in zip(self.buffers, buffers):
                b.copy_(torch.from_numpy(v).view_as(b))

    def step(self, x, y, lr):
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x.to(self.dtype)), y)
        loss.backward()
        grads = [p.grad.detach().double().numpy().ravel().copy() for _, p in self.params]
        self.opt.step()
        return loss.item(), grads

    def state(self):
        weights = [p.detach().double().numpy().ravel() for _, p in self.params]
        velocity = [self.opt.state[p]["momentum_buffer"].double().numpy().ravel() for _, p in self.params]
        return weights, velocity, [b.double().numpy().ravel() for _, b in self.buffers]


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(trainer, fp32, fp64):
    """Per tensor: trainer against fp64 and PyTorch fp32 against fp64, median and maximum."""
    t = [rel(a, b) for a, b in zip(trainer, fp64)]
    p = [rel(a, b) for a, b in zip(fp32, fp64)]
    return {"trainer_median": float(np.median(t)), "trainer_max": max(t),
            "pytorch_fp32_median": float(np.median(p)), "pytorch_fp32_max": max(p)}


def parse():
    ap = argparse.ArgumentParser()
    for name, kind, default in [("model", str, "resnet20"), ("seed", int, 1), ("epochs", int, 1), ("iterations", int, 0),
                                ("batch", int, 64), ("lr", float, 0.1), ("schedule", str, "cosine"),
                                ("warmup", float, 0.0), ("momentum", float, 0.9), ("wd", float, 5e-4),
                                ("width", float, 1.0), ("threads", int, 2),
                                ("data-dir", str, "/usr/share/datasets/fashion-mnist")]:
        ap.add_argument("--" + name, type=kind, default=default)
    ap.add_argument("--start", required=True, help="the trainer's start and states (paired_step.cpp)")
    ap.add_argument("--steps", type=int, required=True, help="K: the trainer ran iterations 0..K-1")
    return ap.parse_args()


def main():
    a = parse()
    torch.set_num_threads(a.threads)
    x, y = accuracy.load(a.data_dir, True)
    model = accuracy.build(a.model, a.width)
    flags = accuracy.load_start(model, a.start)
    bpe = len(y) // a.batch
    total = a.iterations or a.epochs * bpe
    warmup = accuracy.warmup_iterations(a, bpe)
    order = torch.from_numpy(np.fromfile(os.path.join(a.start, "order0.u32"), dtype=np.uint32).astype(np.int64))
    batch = lambda it: (x[order[it * a.batch:(it + 1) * a.batch]], y[order[it * a.batch:(it + 1) * a.batch]])
    path = lambda name: os.path.join(a.start, name)
    last = a.steps - 1
    fp32, fp64 = Side(model, flags, a, torch.float32), Side(model, flags, a, torch.float64)
    pre = [tensors(fp32.params, path("pre_weights.f32")), tensors(fp32.params, path("pre_velocity.f32")),
           tensors(fp32.buffers, path("pre_buffers.f32"))]
    post = [tensors(fp32.params, path("post_weights.f32")), tensors(fp32.params, path("post_velocity.f32")),
            tensors(fp32.buffers, path("post_buffers.f32"))]
    trained = Side(model, flags, a, torch.float32)
    trained.load(*post)
    test_loss, test_accuracy = accuracy.evaluate(trained.model, *accuracy.load(a.data_dir, False))
    lr = accuracy.lr_at(last, a, warmup, total)
    losses, grads, after = {}, {}, {}
    for name, side in (("fp32", fp32), ("fp64", fp64)):
        side.load(*pre)
        losses[name], grads[name] = side.step(*batch(last), lr)
        after[name] = side.state()
    with open(path("losses.txt")) as f:
        trainer_losses = [float(v) for v in f]
    step = {"loss": {"trainer": trainer_losses[last], "pytorch_fp32": losses["fp32"], "pytorch_fp64": losses["fp64"]},
            "gradients": compare(tensors(fp32.params, path("grads.f32")), grads["fp32"], grads["fp64"])}
    for i, what in enumerate(("weights", "momentum", "running_statistics")):
        step[what] = compare(post[i], after["fp32"][i], after["fp64"][i])
    # The whole run from the trainer's start: fp32 and fp64 PyTorch, the trainer's final weights.
    run32, run64 = Side(model, flags, a, torch.float32), Side(model, flags, a, torch.float64)
    for it in range(a.steps):
        for side in (run32, run64):
            side.step(*batch(it), accuracy.lr_at(it, a, warmup, total))
    w32, w64 = np.concatenate(run32.state()[0]), np.concatenate(run64.state()[0])
    trainer = np.concatenate(post[0])
    path_weights = {"trainer_vs_fp64": rel(trainer, w64), "pytorch_fp32_vs_fp64": rel(w32, w64),
                    "trainer_vs_pytorch_fp32": rel(trainer, w32)}
    print(json.dumps({"model": a.model, "seed": a.seed, "steps": a.steps, "iteration": last, "lr": lr,
                      "step_from_trainer_state": step, "run_from_trainer_start_weights": path_weights,
                      "pytorch_test_of_trainer_state": {"accuracy": test_accuracy, "loss": test_loss},
                      "threads": a.threads, **accuracy.context()}), flush=True)


if __name__ == "__main__":
    main()

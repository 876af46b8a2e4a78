"""PyTorch DDP side of the end-to-end runs: one rank of a data-parallel job (gloo, buckets of
--bucket-mb) training the trainer's vgg11 / resnet20 as gradsync-train does: its initialization,
SGD with momentum and weight decay on conv and linear weights only, its learning-rate schedule.
Started once per node by the sweep (torchrun is broken on Python 3.11): RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT come from the environment.

--dataset synthetic (throughput): one fixed random batch. --dataset fashion-mnist (time to
accuracy): the gzipped IDX files read and normalized as trainer/src/data.cpp does, each rank taking
every WORLD_SIZE-th sample of a per-epoch permutation as its ShardedLoader does (drawn by torch's
generator, seeded seed * 1000003 + epoch), and rank 0 evaluating on the test set every
--eval-every iterations (on its last --eval-samples only, if given) and at every epoch's end (all
of it) as gradsync-train does.

--hook: DDP's own communication hooks. fp16: default_hooks.fp16_compress_hook (buckets sent as
fp16). powersgd: powerSGD_hook with PowerSGDState(matrix_approximation_rank=--powersgd-rank,
start_powerSGD_iter=--powersgd-start, use_error_feedback and warm_start on as its docs advise,
min_compression_rate 2, orthogonalization_epsilon 1e-8 since VGG has no batch norm to keep a
column off zero). --powersgd-start defaults to 2, the least DDP allows with error feedback and
warm start (it rebuilds its buckets after iteration 1): gradsync's lossy codecs compress from the
first iteration, and the docs' advice of 10% of the steps protects final accuracy, not time to a
target. --compute-only: the same steps without DDP and without a process group.

Before anything, torch_blas.require checks that PyTorch runs on OpenBLAS (not the reference BLAS)
and sets its threads. Rank 0 writes --metrics in gradsync-train's field names (iteration_seconds,
parameters, evaluations [{iteration, train_seconds, test_loss, test_accuracy}], ...) with the BLAS,
torch version, threads, bucket size and hook under config."""
import argparse
import gzip
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "trainer"))
import torch_blas  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook  # noqa: E402

from trainer_vs_pytorch import resnet20, vgg11  # noqa: E402  the models equal to trainer/src/models.cpp

FASHION_MEAN, FASHION_STD = 0.2860, 0.3530  # trainer/include/gradsync/trainer/data.hpp
EVAL_BATCH = 500  # gradsync-train's evaluation batch


def read_idx(images_path, labels_path):
    """(inputs [N, 1, H, W] normalized as read_idx in trainer/src/data.cpp, labels [N])."""
    def read(path, magic, header):
        try:
            with gzip.open(path) as f:
                data = f.read()
        except OSError as e:
            sys.exit(f"ddp.py: {path}: {e} (install dataset-fashion-mnist or pass --data-dir)")
        if len(data) < header or int.from_bytes(data[:4], "big") != magic:
            sys.exit(f"ddp.py: {path}: not an IDX file (magic number {magic:#010x} expected)")
        return data
    img, lab = read(images_path, 0x803, 16), read(labels_path, 0x801, 8)
    n, rows, cols = (int.from_bytes(img[i:i + 4], "big") for i in (4, 8, 12))
    if len(img) - 16 != n * rows * cols or int.from_bytes(lab[4:8], "big") != n or len(lab) - 8 != n:
        sys.exit(f"ddp.py: {images_path} and {labels_path} disagree with their headers ({n} images of {rows}x{cols})")
    pixels = torch.frombuffer(bytearray(img[16:]), dtype=torch.uint8).float().view(n, 1, rows, cols)
    scale, shift = 1.0 / (255.0 * FASHION_STD), FASHION_MEAN / FASHION_STD  # float32 as the trainer's
    return pixels * scale - shift, torch.frombuffer(bytearray(lab[8:]), dtype=torch.uint8).long()


def fashion_mnist_files(data_dir, split):
    """(images, labels) paths of a split ("train" or "t10k"), as load_fashion_mnist names them."""
    return (os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))


def lr_at(a, it, warmup, total):
    """gradsync::trainer::LrSchedule (trainer/src/optimizer.cpp)."""
    if it < warmup:
        return a.lr * (it + 1) / warmup
    p = min(1.0, (it - warmup) / max(1, total - min(total, warmup)))
    return a.lr * {"step": 0.1 ** ((p >= 0.5) + (p >= 0.75)), "cosine": 0.5 * (1 + math.cos(math.pi * p)),
                   "poly": (1 - p) ** 2, "constant": 1.0}[a.lr_schedule]


def evaluate(model, x, y):
    """(mean loss, accuracy) in eval mode, batches of EVAL_BATCH as gradsync-train's evaluate."""
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for first in range(0, len(y), EVAL_BATCH):
            out = model(x[first:first + EVAL_BATCH])
            loss += F.cross_entropy(out, y[first:first + EVAL_BATCH], reduction="sum").item()
            correct += (out.argmax(1) == y[first:first + EVAL_BATCH]).sum().item()
    model.train()
    return loss / len(y), correct / len(y)


def register_hook(a, model):
    """DDP's communication hook for --hook; returns its settings for the metrics."""
    if a.hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return {"hook": "fp16_compress_hook"}
    if a.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=a.powersgd_rank, start_powerSGD_iter=a.powersgd_start,
            min_compression_rate=2, use_error_feedback=True, warm_start=True, orthogonalization_epsilon=1e-8,
            random_seed=a.seed)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return {"hook": "powerSGD_hook", "first_bucket_mb": a.bucket_mb, "matrix_approximation_rank": a.powersgd_rank,
                "start_powerSGD_iter": a.powersgd_start, "min_compression_rate": 2, "use_error_feedback": True,
                "warm_start": True, "orthogonalization_epsilon": 1e-8}
    return {"hook": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["vgg11", "resnet20"], required=True)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float,
                    help="DDP's bucket_cap_mb (default 25, DDP's own; --hook powersgd: one bucket of the whole model)")
    ap.add_argument("--hook", choices=["none", "fp16", "powersgd"], default="none")
    ap.add_argument("--powersgd-rank", type=int, default=4, help="matrix_approximation_rank (default 4)")
    ap.add_argument("--powersgd-start", type=int, default=2, help="start_powerSGD_iter (default 2, the least allowed)")
    ap.add_argument("--compute-only", action="store_true")
    # gradsync-train's options and defaults (trainer/main.cpp)
    ap.add_argument("--dataset", choices=["synthetic", "fashion-mnist"], default="synthetic")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-samples", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--lr-schedule", choices=["constant", "step", "cosine", "poly"], default="cosine")
    ap.add_argument("--warmup", type=float, default=0.2, help="linear warm-up in epochs")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--metrics", required=True)
    a = ap.parse_args()
    if a.hook == "powersgd" and a.powersgd_start < 2:
        ap.error("--powersgd-start must be at least 2 (DDP rebuilds its buckets after iteration 1)")
    if a.hook != "none" and a.compute_only:
        ap.error("--hook needs DDP: drop --compute-only")

    blas = torch_blas.require(a.threads, install_missing=False)  # the sweep installed it outside the namespaces
    torch.manual_seed(a.seed)
    model = {"vgg11": vgg11, "resnet20": resnet20}[a.model](width=a.width)
    parameters = sum(p.numel() for p in model.parameters())
    rank, world, hook = 0, 1, {"hook": None}
    model_mb = parameters * 4 / 2**20
    if a.hook == "powersgd":
        if a.bucket_mb is not None and a.bucket_mb < model_mb:
            ap.error(f"--hook powersgd needs one bucket (--bucket-mb >= {model_mb:.1f}, the model; or leave it out): "
                     "over gloo, PyTorch 1.13's powerSGD_hook fails with two or more")
        a.bucket_mb = math.ceil(model_mb) + 1
        # DDP's buckets after its rebuild at iteration 1 start with one of this size (1 MiB by
        # default, tunable as its source says): the whole model, so that one bucket stays one
        torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = int(a.bucket_mb * 2**20)
    elif a.bucket_mb is None:
        a.bucket_mb = 25.0
    if not a.compute_only:
        torch.distributed.init_process_group("gloo")  # env:// rendezvous
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        hook = register_hook(a, model)
    net = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    model.train()
    # weight decay on conv and linear weights only, as gradsync's Optimizer (not biases, batch norm)
    decay = [p for p in net.parameters() if p.dim() > 1]
    rest = [p for p in net.parameters() if p.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
                          lr=a.lr, momentum=a.momentum)

    if a.dataset == "fashion-mnist":
        train_x, train_y = read_idx(*fashion_mnist_files(a.data_dir, "train"))
        test_x, test_y = read_idx(*fashion_mnist_files(a.data_dir, "t10k"))
        batches_per_epoch = len(train_y) // world // a.batch
    else:
        x, y = torch.randn(a.batch, 1, 28, 28), torch.arange(a.batch) % 10
        batches_per_epoch = 8192 // world // a.batch  # gradsync-train's --synthetic-size default
    if batches_per_epoch == 0:
        sys.exit(f"ddp.py: {world} ranks x batch {a.batch} do not fit one epoch")
    warmup = round(a.warmup * batches_per_epoch)
    evaluations, perm, perm_epoch = [], None, None
    test_loss = test_accuracy = None

    seconds, cpu_seconds, first_unix = [], [], time.time()
    for it in range(a.iterations):
        start = time.perf_counter()  # the batch's gathering counts, as in gradsync-train's iteration
        cpu_start = time.process_time()  # every thread of the process: compute, the reducer, gloo's
        epoch, index = divmod(it, batches_per_epoch)
        if a.dataset == "fashion-mnist":
            if perm_epoch != epoch:
                perm = torch.randperm(len(train_y), generator=torch.Generator().manual_seed(a.seed * 1000003 + epoch))
                perm_epoch = epoch
            idx = perm[(index * a.batch + torch.arange(a.batch)) * world + rank]
            x, y = train_x[idx], train_y[idx]
        for group in opt.param_groups:
            group["lr"] = lr_at(a, it, warmup, a.iterations)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()  # DDP all-reduces buckets during backward
        opt.step()
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
        epoch_end = index == batches_per_epoch - 1 or it + 1 == a.iterations
        due = epoch_end or (a.eval_every and (it + 1) % a.eval_every == 0)
        if rank == 0 and a.dataset == "fashion-mnist" and due:
            tail = a.eval_samples if a.eval_samples and not epoch_end else len(test_y)
            test_loss, test_accuracy = evaluate(net, test_x[-tail:], test_y[-tail:])
            evaluations.append({"iteration": it + 1, "train_seconds": sum(seconds), "test_loss": test_loss,
                                "test_accuracy": test_accuracy})

    if rank == 0:
        with open(a.metrics, "w") as out:
            json.dump({"config": {"model": a.model, "width": a.width, "dataset": a.dataset, "batch_per_rank": a.batch,
                                  "iterations": a.iterations, "lr": a.lr, "lr_schedule": a.lr_schedule,
                                  "warmup_epochs": a.warmup, "momentum": a.momentum, "weight_decay": a.wd,
                                  "seed": a.seed, "threads": a.threads, "ranks": world,
                                  "bucket_mb": a.bucket_mb, "compute_only": a.compute_only, **hook, "blas": blas},
                       "parameters": parameters, "iterations": a.iterations, "seconds": sum(seconds),
                       "iteration_seconds": seconds, "iteration_process_cpu_seconds": cpu_seconds,
                       "first_iteration_unix": first_unix,
                       "test_loss": test_loss, "test_accuracy": test_accuracy, "evaluations": evaluations},
                      out, indent=2)
    if not a.compute_only:
        torch.distributed.destroy_process_group()
        # With a communication hook, PyTorch 1.13's DDP now and then hangs for good while this
        # function's locals (the model, its reducer) are freed: 5 of 22 two-rank runs with
        # --hook fp16 on loopback, after destroy_process_group had returned. Nothing is left to
        # free that matters, so leave without it (12 of 12 runs then ended).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

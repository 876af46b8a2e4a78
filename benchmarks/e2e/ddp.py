"""PyTorch DDP side of the end-to-end runs: one rank of a data-parallel job (gloo, buckets of
--bucket-mb) training the trainer's vgg11 / resnet20 on a fixed synthetic batch, with SGD and
momentum as gradsync-train does. Started once per node by the sweep (torchrun is broken on
Python 3.11): RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the environment.
--compute-only: the same steps without DDP and without a process group (no all-reduce).
Rank 0 writes --metrics in gradsync-train's field names (iteration_seconds, parameters, ...)."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainer"))
from trainer_vs_pytorch import resnet20, vgg11  # noqa: E402  the models equal to trainer/src/models.cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["vgg11", "resnet20"], required=True)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--compute-only", action="store_true")
    ap.add_argument("--metrics", required=True)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = {"vgg11": vgg11, "resnet20": resnet20}[a.model](width=a.width)
    parameters = sum(p.numel() for p in model.parameters())
    rank = 0
    if not a.compute_only:
        torch.distributed.init_process_group("gloo")  # env:// rendezvous
        rank = torch.distributed.get_rank()
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.arange(a.batch) % 10

    seconds, first_unix = [], time.time()
    for _ in range(a.iterations):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()  # DDP all-reduces buckets during backward
        opt.step()
        seconds.append(time.perf_counter() - start)

    if rank == 0:
        with open(a.metrics, "w") as out:
            json.dump({"config": {"model": a.model, "width": a.width, "batch_per_rank": a.batch, "threads": a.threads,
                                  "bucket_mb": a.bucket_mb, "compute_only": a.compute_only,
                                  "ranks": 1 if a.compute_only else torch.distributed.get_world_size(),
                                  "torch": torch.__version__},
                       "parameters": parameters, "iterations": a.iterations, "iteration_seconds": seconds,
                       "first_iteration_unix": first_unix}, out, indent=2)
    if not a.compute_only:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

"""One rank of one contender of the PyTorch end-to-end sweep (sweep.sh): the same torchvision (or
Transformer) model, batch, threads and SGD step, synchronized by

  compute    nothing: each process trains its own replica (the compute-only bound)
  hooks      gradsync.torch in a world of one: the hooks' cost over plain PyTorch, no network
  ddp        DistributedDataParallel, gloo, default buckets (25 MB)
  ddp-fp16   the same with DDP's fp16_compress_hook
  ddp-view   DDP with the settings its documentation recommends where the model allows them:
             gradient_as_bucket_view=True (no copy into the buckets), static_graph=True
  ddp-powersgd
             DDP with its powerSGD_hook: PowerSGDState's defaults (rank 1, error feedback, warm
             start) but start_powerSGD_iter=2, the least it allows with those (DDP rebuilds its
             buckets after iteration 1; its default, 1,000, would never compress in a benchmark's
             few iterations), and all gradients in one bucket: with DDP's default buckets it fails
             under gloo on PyTorch 2.15 ("Received data size doesn't match expected size" in 3 of 3
             runs, results/2026-11-29-powersgd-gloo)
  ddp-gs-fp16, ddp-gs-qsgd8
             DDP (its buckets, its order) with gradsync.torch.ddp_comm_hook: the buckets through
             gradsync's ring with that codec
  wfbp       gradsync: whole layers, FIFO, fp32, ring (wait-free backprop)
  p3         gradsync: fixed:40000, forward, fp32, ring (P3)
  p3-fp16    p3 with the fp16 codec
  p3-qsgd8   p3 with the qsgd8 codec
  auto       gradsync as shipped: slicing "auto" (tuned to the link at the first step), forward, fp32, ring
  fusion     gradsync: layers fused into units of up to 25 MiB (DDP's bucket size), forward, fp32, ring

DDP ranks come from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun is broken on Python
3.11); gradsync ranks from mpirun (ddp-gs-*: mpirun's ranks, DDP's rendezvous at MASTER_ADDR/PORT). Rank 0 writes --metrics: every iteration's seconds, the
parameters, the BLAS library PyTorch loaded, gradsync's counters.
"""
import argparse
import json
import os
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

GRADSYNC = {
    "hooks": dict(slicing="fixed:40000", priority="forward", codec="fp32"),
    "wfbp": dict(slicing="whole", priority="fifo", codec="fp32"),
    "p3": dict(slicing="fixed:40000", priority="forward", codec="fp32"),
    "p3-fp16": dict(slicing="fixed:40000", priority="forward", codec="fp16"),
    "p3-qsgd8": dict(slicing="fixed:40000", priority="forward", codec="qsgd8"),
    "auto": dict(slicing="auto", priority="forward", codec="fp32"),
    "fusion": dict(slicing="fusion:25MiB", priority="forward", codec="fp32"),
}
DDP = {"ddp": {}, "ddp-fp16": {}, "ddp-view": dict(gradient_as_bucket_view=True, static_graph=True),
       "ddp-powersgd": dict(bucket_cap_mb=2**20), "ddp-gs-fp16": {}, "ddp-gs-qsgd8": {}}
CONTENDERS = ["compute", *DDP, *GRADSYNC]


class TransformerLM(nn.Module):
    """A Transformer encoder language model (the attention model of the sweep)."""

    def __init__(self, vocab=16384, width=512, layers=6, heads=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, 1024, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        return self.head(self.encoder(h))


def build(model, classes):
    """The model and a fixed synthetic batch maker."""
    if model == "transformer":
        return TransformerLM()
    import torchvision  # python3-torchvision, for the benchmarks only

    return getattr(torchvision.models, model)(num_classes=classes)


def blas_library():
    """The BLAS PyTorch runs on: the MKL a registry wheel carries inside libtorch_cpu, or the shared
    object Debian's PyTorch loaded (libblas.so.3: the sweep requires OpenBLAS). Not numpy's own."""
    config = torch.__config__.show()
    if "BLAS_INFO=mkl" in config:
        version = re.search(r"Math Kernel Library Version (\S+)", config)
        return f"MKL {version.group(1) if version else '(version not shown)'}, inside libtorch_cpu"
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in os.path.basename(path) and "numpy" not in path:
                return os.path.realpath(path)
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="vgg16, resnet50 (any torchvision model) or transformer")
    ap.add_argument("--contender", choices=CONTENDERS, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--input", required=True, help="CxHxW for images; the sequence length for transformer")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900, help="gradsync: seconds to wait for a peer")
    ap.add_argument("--metrics", required=True)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    classes = 1000
    net = build(a.model, classes)
    parameters = sum(p.numel() for p in net.parameters())
    if a.model == "transformer":
        x = torch.randint(0, 16384, (a.batch, int(a.input)))
        y = torch.roll(x, -1, 1)
        loss_of = lambda out: F.cross_entropy(out.flatten(0, 1), y.flatten())
    else:
        x = torch.randn(a.batch, *[int(d) for d in a.input.split("x")])
        y = torch.arange(a.batch) % classes
        loss_of = lambda out: F.cross_entropy(out, y)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    model, rank, world, sync = net, 0, 1, None
    if a.contender.startswith("ddp"):
        hook = None
        if a.contender.startswith("ddp-gs-"):
            import gradsync.torch as gs

            os.environ.update(RANK=str(gs.rank()), WORLD_SIZE=str(gs.size()))
            hook = gs.ddp_comm_hook(codec=a.contender.removeprefix("ddp-gs-"), collective="ring", timeout=a.timeout)
        torch.distributed.init_process_group("gloo")  # env:// rendezvous
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        model = nn.parallel.DistributedDataParallel(net, **DDP[a.contender])
        if a.contender == "ddp-fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = default_hooks.fp16_compress_hook
        state = None
        if a.contender == "ddp-powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

            hook = powerSGD_hook.powerSGD_hook
            state = powerSGD_hook.PowerSGDState(process_group=None, start_powerSGD_iter=2)
        if hook is not None:
            model.register_comm_hook(state, hook)
    elif a.contender in GRADSYNC:
        import gradsync.torch as gs

        rank, world = gs.rank(), gs.size()
        if a.contender == "hooks" and world != 1:
            raise SystemExit("bench.py: 'hooks' measures gradsync in a world of one: start it without mpirun")
        sync = opt = gs.DistributedOptimizer(opt, net, collective="ring", timeout=a.timeout, **GRADSYNC[a.contender])
    model.train()

    seconds, first_unix = [], time.time()
    for _ in range(a.iterations):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_of(model(x)).backward()  # DDP all-reduces during backward; gradsync hands over
        opt.step()  # gradsync: returns at once, steps each module before its next forward
        seconds.append(time.perf_counter() - start)
    stats = {}
    if sync is not None:
        sync.synchronize()
        stats = sync.stats()
        if sync.tuning():
            stats["tuning"] = sync.tuning()
        sync.close()

    if rank == 0:
        with open(a.metrics, "w") as out:
            json.dump({"config": {"model": a.model, "contender": a.contender, "batch_per_rank": a.batch,
                                  "input": a.input, "threads": a.threads, "ranks": world,
                                  "torch": torch.__version__, "torch_config": torch.__config__.show(),
                                  "ddp_settings": DDP.get(a.contender),
                                  "bucket_cap_mb": (DDP.get(a.contender) or {}).get("bucket_cap_mb", 25),
                                  "comm_hook": getattr(hook, "__name__", None) if a.contender.startswith("ddp") else None,
                                  "blas": blas_library() + (f" (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']})"
                                                            if os.environ.get("OPENBLAS_CORETYPE") else "")},
                       "parameters": parameters, "iterations": a.iterations, "iteration_seconds": seconds,
                       "first_iteration_unix": first_unix, "gradsync": stats}, out, indent=2)
    if a.contender.startswith("ddp"):
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

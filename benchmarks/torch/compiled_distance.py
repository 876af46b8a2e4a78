"""How far torch.compile's default backend (inductor) moves the weights, and where gradsync stands:
the test ConvNet (tests/torch/helpers.py), SGD with momentum, DDP (gloo) and gradsync on 2 ranks.

    mpiexec -np 2 PYTHON benchmarks/torch/compiled_distance.py > results.md

For 1 to 6 steps, the largest difference in any weight between DDP eager, DDP on the whole compiled
model, DDP on the compiled model split before each module with parameters (where gradsync's hooks
split it), and gradsync on the compiled model; and the graphs dynamo made for each."""
import os
import platform
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "torch"))

import conftest  # noqa: E402,F401  (one thread per rank, gloo on loopback)
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import gradsync.torch as gs  # noqa: E402
from helpers import batches, run_ddp, run_gradsync  # noqa: E402
from test_patterns import break_before_modules_with_parameters, compiled_loop  # noqa: E402

STEPS = 6


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; commit {commit}{' (with changes)' if dirty else ''}; "
            f"torch {torch.__version__}, python {platform.python_version()}, {gs.size()} ranks")


def graphs(run):
    counters.clear()
    result = run()
    return result, counters["stats"]["unique_graphs"]


def main():
    rank, size = gs.rank(), gs.size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    loop = compiled_loop("inductor")
    rows, made = [], {}
    for n in range(1, STEPS + 1):
        data = batches(rank, n)
        runs = {"eager": run_ddp(data)}
        runs["whole"], made["DDP, whole graph"] = graphs(lambda: run_ddp(data, loop=loop))
        runs["split"], made["DDP, split"] = graphs(lambda: run_ddp(data, loop=loop, make_model=break_before_modules_with_parameters))
        runs["gradsync"], made["gradsync"] = graphs(lambda: run_gradsync(data, loop=loop))
        d = {(a, b): max((x - y).abs().max().item() for x, y in zip(runs[a].weights, runs[b].weights))
             for a, b in [("gradsync", "split"), ("gradsync", "whole"), ("split", "whole"), ("eager", "whole"), ("eager", "split")]}
        rows.append((n, d))
    if rank == 0:
        print(f"# inductor: largest weight difference after each step\n\n{machine()}\n")
        print("| steps | " + " | ".join(f"{a} - {b}" for a, b in rows[0][1]) + " |")
        print("|---" * (len(rows[0][1]) + 1) + "|")
        for n, d in rows:
            print(f"| {n} | " + " | ".join(f"{v:.3g}" for v in d.values()) + " |")
        print("\ngraphs dynamo made (unique_graphs, 6 steps): " + ", ".join(f"{k} {v}" for k, v in made.items()))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

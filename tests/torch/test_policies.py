"""Every policy string gradsync-train takes trains a PyTorch model: the loss stays finite and the
replicas stay bit-identical. Every codec makes the loss fall, and puts on the wire what it says
(codec.encoded_bytes) instead of fp32."""
import pytest
import torch
import torch.nn as nn

import gradsync.torch as gs
from helpers import assert_replicas_identical, batches, model, run_gradsync

SLICING = ["auto", "whole", "fixed", "fixed:500", "fusion", "fusion:4KiB", "slicefuse", "slicefuse:500", "split", "split:3",
           "split:2:100"]
PRIORITY = ["forward", "fifo"]
CODECS = ["fp32", "fp16", "bf16", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "qsgd8:bucket=128:norm=l2", "onebit",
          "onebit:bucket=256", "topk", "topk:0.1", "ef+fp16", "ef+bf16", "ef+qsgd4", "qsgd8:bypass=0"]
COLLECTIVES = ["ring", "ps", "reduce-broadcast", "hierarchical", "hierarchical:1", "hybrid", "hybrid:4KiB:1", "mpi",
               "gloo"]
CASES = ([dict(slicing=s) for s in SLICING] + [dict(priority=p) for p in PRIORITY] + [dict(codec=c) for c in CODECS] +
         [dict(collective=c) for c in COLLECTIVES] +
         [dict(collective="dgt"), dict(collective="dgt:alpha=0.5:p0=2:block=64"),
          dict(codec="qsgd8", collective="hierarchical"), dict(codec="fp16", collective="reduce-broadcast")])


@pytest.mark.parametrize("policies", CASES, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_every_policy_trains(world, policies):
    if policies == dict(collective="mpi") and not gs._C.world()[2]:
        with pytest.raises(gs.UsageError, match="collective 'mpi' runs MPI's own all-reduce and needs transport::Mpi"):
            run_gradsync(batches(world[0], 1), **policies)
        return
    if policies == dict(collective="gloo") and not gs.build_info()["gloo"]:
        with pytest.raises(gs.ConfigError, match="collective 'gloo' needs gradsync built with Gloo"):
            run_gradsync(batches(world[0], 1), **policies)
        return
    ours = run_gradsync(batches(world[0], 3), **policies)
    assert all(torch.isfinite(torch.tensor(ours.losses)))
    assert_replicas_identical(ours.weights)


def test_nccl_without_a_gpu_build_says_so(world):
    net = model()
    with pytest.raises(gs.ConfigError, match="collective 'nccl' needs gradsync built with NCCL"):
        gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), net, collective="nccl")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(64, 256)
        self.out = nn.Linear(256, 10)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))


def learnable(rank, steps):
    """Batches whose labels a fixed linear teacher gives: a loss that can fall fast."""
    teacher = torch.randn(64, 10, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(100 + rank)
    xs = [torch.randn(32, 64, generator=g) for _ in range(4)]
    return [(x, (x @ teacher).argmax(1)) for x in xs] * (steps // 4)


def learnable_setup(world):
    """A codec test's data on this rank, model and optimizer; skips a world of one."""
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks (nothing on the wire)")
    return learnable(world[0], 24), lambda: model(Mlp), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)


def assert_loss_falls(losses, codec):
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.75 * first, f"{codec}: loss {first:.3f} -> {last:.3f}"


@pytest.mark.parametrize("codec", ["fp16", "bf16", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "onebit", "topk:0.05",
                                   "ef+fp16", "ef+qsgd4"])
def test_every_codec_trains_and_shrinks_the_wire(world, ddp_group, codec):
    data, make, opt = learnable_setup(world)
    base = run_gradsync(data, make_model=make, make_opt=opt, slicing="whole")
    ours = run_gradsync(data, make_model=make, make_opt=opt, slicing="whole", codec=codec + ":bypass=0")
    assert_loss_falls(ours.losses, codec)
    assert ours.stats["elements_compressed"] == ours.stats["elements"]  # bypass=0: every unit compressed
    # The job's bytes on the wire against fp32's, as the codec's sizes say for these units (the
    # collective sends segments of units, whose ratio is within a few percent of the units').
    sent = torch.tensor([float(ours.stats["bytes_sent"]), float(base.stats["bytes_sent"])], dtype=torch.float64)
    torch.distributed.all_reduce(sent)
    measured = (sent[0] / sent[1]).item()
    sizes = [256 * 64, 256, 10 * 256, 10]
    said = sum(gs._C.encoded_bytes(codec, n) for n in sizes) / sum(gs._C.encoded_bytes("fp32", n) for n in sizes)
    print(f"{codec}: measured {measured:.4f}, codec says {said:.4f}")
    assert abs(measured - said) <= 0.05 * said, f"{codec}: {measured:.4f} of fp32's bytes, the codec says {said:.4f}"

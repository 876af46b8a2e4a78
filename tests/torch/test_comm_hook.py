"""gradsync.torch.ddp_comm_hook: DDP's buckets through gradsync's codecs and collectives.

fp16 and bf16 are DDP's own fp16_compress_hook / bf16_compress_hook maths (round, divide by the
world size in the narrow type, sum): bit-identical to them on 2 ranks, where the sum of two
values has one rounding in any order; on 3 ranks the sums' order may differ from gloo's, so
within one step of the narrow type's rounding. fp32 is DDP's plain all-reduce. Every other codec
trains, and puts fewer bytes on the wire than fp32.
"""
import os
import shutil
import signal
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import gradsync.torch as gs
from helpers import Result, assert_replicas_identical, batches, model, plain_loop, sgd
from test_policies import assert_loss_falls, learnable_setup


def run_hooked(data, hook, make_model=model, make_opt=sgd, **ddp_kwargs):
    """The plain loop under DDP with `hook` registered (None: DDP's own all-reduce)."""
    net = make_model()
    wrapped = DDP(net, **ddp_kwargs)
    if hook is not None:
        wrapped.register_comm_hook(None, hook)
    opt = make_opt(net.parameters())
    losses = plain_loop(wrapped, opt, data, wrapped.no_sync)
    return Result(net, opt, losses)


def assert_same(ours, theirs, exact):
    assert_replicas_identical(ours.weights + ours.state)
    for i, (a, b) in enumerate(zip(ours.weights + ours.state, theirs.weights + theirs.state)):
        if exact:
            assert torch.equal(a, b), f"tensor {i}: max difference {(a - b).abs().max().item():.3g} from DDP's hook"
        else:  # fp32 sums of 3 ranks in two orders
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"tensor {i}: {(a - b).abs().max().item():.3g} from ring"


def averaged_gradients(hook, x, y):
    """One backward pass under DDP with `hook`: the gradients DDP leaves in .grad."""
    net = model()
    wrapped = DDP(net, bucket_cap_mb=0.01)
    if hook is not None:
        wrapped.register_comm_hook(None, hook)
    F.cross_entropy(wrapped(x), y).backward()
    return [p.grad.clone() for p in net.parameters()]


HOOKS = [("fp16", default_hooks.fp16_compress_hook, 2.0 ** -10), ("bf16", default_hooks.bf16_compress_hook, 2.0 ** -7),
         ("fp32", None, 2.0 ** -23)]


@pytest.mark.parametrize("codec,theirs,ulp", HOOKS, ids=[h[0] for h in HOOKS])
def test_same_weights_as_ddps_own_hook(world, ddp_group, codec, theirs, ulp):
    """2 ranks: training (6 steps, several buckets) bit-identical to DDP with its own hook. 3 ranks:
    gloo rounds each partial sum to the narrow type, the ring only the whole sum: one backward's
    mean within two roundings of the addends' size."""
    if codec == "bf16" and int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("PyTorch 1.x's DDP refuses its bf16_compress_hook without CUDA and NCCL")
    if world[1] <= 2:
        data = batches(world[0], 6)
        # Small buckets: several per iteration, so the order DDP hands them over matters.
        ours = run_hooked(data, gs.ddp_comm_hook(codec=codec), bucket_cap_mb=0.01)
        assert_same(ours, run_hooked(data, theirs, bucket_cap_mb=0.01), exact=True)
        return
    x, y = batches(world[0], 1)[0]
    ours, reference = averaged_gradients(gs.ddp_comm_hook(codec=codec), x, y), averaged_gradients(theirs, x, y)
    assert_replicas_identical(ours)
    net = model()
    F.cross_entropy(net(x), y).backward()
    for i, (a, b, p) in enumerate(zip(ours, reference, net.parameters())):
        # Each rounding of a partial sum is within half a step of the sum of the addends' sizes.
        magnitude = p.grad.abs() / world[1]
        dist.all_reduce(magnitude)
        bound = 2 * ulp * magnitude + 1e-7  # 1e-7: fp16's subnormal steps (6e-8)
        assert ((a - b).abs() <= bound).all(), f"gradient {i}: {(a - b).abs().max().item():.3g} from DDP's hook"
        assert not torch.equal(a, torch.zeros_like(a))


@pytest.mark.parametrize("collective", ["reduce-broadcast", "hierarchical", "hybrid", "mpi"])
def test_every_collective_that_fits_agrees_with_ring(world, ddp_group, collective):
    """The collectives sum in their own orders: fp32 rounding apart on 3 ranks, replicas identical."""
    if collective == "mpi" and world[1] == 1:
        pytest.skip("MPI's all-reduce needs mpirun")
    data = batches(world[0], 4)
    ours = run_hooked(data, gs.ddp_comm_hook(codec="fp32", collective=collective))
    ring = run_hooked(data, gs.ddp_comm_hook(codec="fp32", collective="ring"))
    assert_same(ours, ring, exact=world[1] <= 2)


@pytest.mark.parametrize("codec", ["qsgd8", "qsgd4", "onebit", "topk:0.05", "ef+fp16", "ef+qsgd4"])
def test_every_codec_trains_and_shrinks_the_wire(world, ddp_group, codec):
    data, make, opt = learnable_setup(world)
    base_hook, hook = gs.ddp_comm_hook(codec="fp32"), gs.ddp_comm_hook(codec=codec + ":bypass=0")
    run_hooked(data, base_hook, make_model=make, make_opt=opt)
    ours = run_hooked(data, hook, make_model=make, make_opt=opt)
    assert_loss_falls(ours.losses, codec)
    assert_replicas_identical(ours.weights)
    stats, base = hook.stats(), base_hook.stats()
    assert stats["iterations"] == len(data) and stats["elements"] == base["elements"]
    assert 0 < stats["bytes_sent"] < 0.6 * base["bytes_sent"], f"{codec}: {stats['bytes_sent']} bytes against fp32's {base['bytes_sent']}"


def test_collectives_that_keep_state_per_unit_are_refused(world):
    with pytest.raises(gs.ConfigError, match="collective 'ps' keeps state per unit .*DistributedOptimizer"):
        gs.ddp_comm_hook(collective="ps")
    with pytest.raises(gs.ConfigError, match="collective 'mpi' sums fp32 values .* needs a lossless codec"):
        gs.ddp_comm_hook(codec="qsgd8", collective="mpi")


def test_ranks_with_different_codecs_are_told(world):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")
    codec = "qsgd8" if world[0] == world[1] - 1 else "fp16"
    with pytest.raises(gs.PeerError, match=f"rank {world[1] - 1}.*qsgd8"):
        gs.ddp_comm_hook(codec=codec)


def test_float64_buckets_are_refused(world, ddp_group):
    net = DDP(model().double())
    net.register_comm_hook(None, gs.ddp_comm_hook())
    x, y = batches(world[0], 1)[0]
    with pytest.raises((gs.UsageError, RuntimeError), match="contiguous float32 CPU tensor .* fp32 parameters"):
        F.cross_entropy(net(x.double()), y).backward()
    dist.barrier()


@pytest.mark.parametrize("codec", ["fp16", "qsgd8"])
def test_non_finite_gradient_fails_every_rank(world, ddp_group, codec):
    """fp16 carries the NaN in the sum: every rank fails on the same bucket, naming whose it was.
    A lossy codec's encode of it means nothing: that rank fails before sending, its peers when they
    time out waiting (1 s here)."""
    hook = gs.ddp_comm_hook(codec=codec, timeout=1.0)
    net = DDP(model())
    net.register_comm_hook(None, hook)
    x, y = batches(world[0], 1)[0]
    bad = world[0] == world[1] - 1
    scale = float("nan") if bad else 1.0
    if codec == "fp16" or bad:
        where = "this rank's gradient" if bad else r"the ranks' aggregate"
        match = rf"DDP's bucket \d+ holds a non-finite value in {where}"
    else:
        match = r"rank \d"  # whichever peer it waited for
    with pytest.raises((gs.UsageError, gs.PeerError, RuntimeError), match=match):
        (F.cross_entropy(net(x), y) * scale).backward()
    dist.barrier()


def wide_mlp():
    """About 4.5 million parameters (18 MB): DDP's first iteration hands them over as one bucket."""
    return nn.Sequential(nn.Flatten(), nn.Linear(144, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                         nn.Linear(2048, 10))


def test_a_first_bucket_of_the_whole_model_completes(world, ddp_group):
    """DDP's first iteration hands over the whole model as one bucket, then DDP rebuilds its buckets
    (a broadcast from rank 0) before the second: the bucket's last message must reach every peer
    while its sender's hook thread is idle, or the peers wait for each other forever."""
    hook, sizes = gs.ddp_comm_hook(codec="fp16"), []

    def counted(state, bucket):
        sizes.append(bucket.buffer().numel())
        return hook(state, bucket)

    ours = run_hooked(batches(world[0], 3), counted, make_model=lambda: model(wide_mlp))
    assert sizes[0] == sum(w.numel() for w in ours.weights) > 4_000_000, sizes
    assert hook.stats()["iterations"] == 3
    assert_replicas_identical(ours.weights)


@pytest.mark.timeout(240)
def test_over_tcp_the_first_bucket_does_not_hang(world):
    """The test above on 2 ranks that talk over Open MPI's TCP transport only, as ranks on two nodes
    do: there the rest of a large message moves only inside MPI calls on the sending side. Small
    socket buffers make the bucket outrun them, as it outruns a slow link: a rank whose part of the
    ring is done and that makes no more MPI calls strands its last message. Started from the 1-rank
    run, so that the test can end the 2 ranks and fail rather than hang."""
    if world[1] != 1:
        pytest.skip("starts 2 ranks of its own from the 1-rank run")
    mpiexec = shutil.which("mpiexec")
    assert mpiexec, "mpiexec (Open MPI) is not on PATH"
    here = os.path.dirname(os.path.abspath(__file__))
    tcp_only = ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                "--mca", "btl_tcp_sndbuf", "65536", "--mca", "btl_tcp_rcvbuf", "65536"]
    ranks = [mpiexec, "-np", "2", *tcp_only, sys.executable, "-m", "pytest", "-c", os.path.join(here, "pytest.ini"),
             "-o", "timeout=60", os.path.abspath(__file__) + "::test_a_first_bucket_of_the_whole_model_completes"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    run = subprocess.Popen(ranks, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        out, _ = run.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # mpiexec and both ranks
        out, _ = run.communicate()
        pytest.fail("2 ranks over TCP hung for 180 s in DDP's first iteration or its bucket rebuild:\n" + out[-4000:])
    assert run.returncode == 0, out[-4000:]

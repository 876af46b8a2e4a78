"""Models, data and training loops for the gradsync.torch tests: one loop body, run under DDP and
under gradsync.DistributedOptimizer, so the two differ only in who aggregates the gradients."""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gradsync.torch as gs


class ConvNet(nn.Module):
    """Two conv + batch-norm blocks and a linear classifier, for 1x12x12 inputs."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)  # batch norm follows: a bias would get no gradient
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 3 * 3, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def model(cls=ConvNet, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(**kwargs)


def batches(rank, steps, batch=16, shape=(1, 12, 12), classes=10, seed=1):
    """Rank `rank`'s batches: its own data, the same in every run."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return [(torch.randn(batch, *shape, generator=g), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(steps)]


def sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)


def adam(params):
    return torch.optim.Adam(params, lr=1e-3)


def plain_loop(net, opt, data, no_sync):
    """forward, backward, step, zero_grad: the loop every user writes."""
    losses = []
    for x, y in data:
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def optimizer_state(net, opt):
    """The optimizer's per-parameter tensors (momentum, Adam's moments), in parameter order."""
    return [v.clone() for p in net.parameters() for v in opt.state.get(p, {}).values() if torch.is_tensor(v)]


class Result:
    def __init__(self, net, opt, losses=None, stats=None, policies=None, tuning=None):
        self.weights = [p.detach().clone() for p in net.parameters()]
        self.state = optimizer_state(net, opt)
        self.losses, self.stats = losses, stats
        self.policies, self.tuning = policies, tuning  # gradsync's describe() and tuning()


def run_ddp(data, loop=plain_loop, make_model=model, make_opt=sgd, **ddp_kwargs):
    """The loop under DDP (gloo, default buckets)."""
    net = make_model()
    wrapped = DDP(net, **ddp_kwargs)
    opt = make_opt(net.parameters())
    losses = loop(wrapped, opt, data, wrapped.no_sync)
    return Result(net, opt, losses)


def run_gradsync(data, loop=plain_loop, make_model=model, make_opt=sgd, **kwargs):
    """The loop under gradsync, every step applied at the end (synchronize())."""
    net = make_model()
    inner = make_opt(net.parameters())
    with gs.DistributedOptimizer(inner, net, **kwargs) as opt:
        losses = loop(net, opt, data, contextlib.nullcontext)
        opt.synchronize()
        return Result(net, inner, losses, opt.stats(), opt.describe(), opt.tuning())


def assert_replicas_identical(tensors):
    """Every rank holds rank 0's tensors, bit for bit."""
    for i, w in enumerate(tensors):
        theirs = gs.broadcast(w.clone())
        assert torch.equal(theirs, w), f"tensor {i} differs from rank 0's on rank {gs.rank()}"


def assert_matches_ddp(ours, ddp):
    """2 ranks: DDP's weights and optimizer state bit for bit (the mean of two gradients is
    (a + b) / 2 in any order). More ranks: within fp32 rounding of sums taken in another order,
    and our replicas bit-identical."""
    assert_replicas_identical(ours.weights + ours.state)
    assert len(ours.state) == len(ddp.state)
    for i, (a, b) in enumerate(zip(ours.weights + ours.state, ddp.weights + ddp.state)):
        if gs.size() == 2:
            assert torch.equal(a, b), f"tensor {i}: max difference {(a - b).abs().max().item():.3g} from DDP"
        else:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"tensor {i}: {(a - b).abs().max().item():.3g} from DDP"

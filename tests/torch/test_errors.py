"""Bad input gets an error naming the parameter (or the policy) and the fix - on every rank, and
never a hang."""
import contextlib
import re

import pytest
import torch
import torch.nn as nn
import torch.distributed as dist
import torch.nn.functional as F

import gradsync.torch as gs
from helpers import batches, model, sgd


def train(net, opt, data):
    for x, y in data:
        F.cross_entropy(net(x), y).backward()
        opt.step()
        opt.zero_grad()


class SparseEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 4, sparse=True)
        self.fc = nn.Linear(4, 2)

    def forward(self, t):
        return self.fc(self.emb(t))


def test_sparse_gradient_names_the_parameter(world):
    net = model(SparseEmbedding)
    with gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), net):
        with pytest.raises(RuntimeError, match=r"parameter 'emb.weight' got a sparse gradient.*sparse=False"):
            net(torch.tensor([1, 2, 3])).sum().backward()


def test_float64_parameters_name_the_parameter(world):
    net = model().double()
    with pytest.raises(gs.UsageError, match=r"parameter 'conv1.weight' is Double.*\.float\(\)"):
        gs.DistributedOptimizer(sgd(net.parameters()), net)


def test_a_model_that_differs_between_ranks(world):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")
    net = model(classes=10 + (world[0] == world[1] - 1))  # the last rank's classifier is larger
    last = world[1] - 1
    with pytest.raises(gs.PeerError, match=rf"the model differs between ranks: rank {last} has parameter 'fc.weight' "
                                           r"\[11, 144\].* where rank 0 has parameter 'fc.weight' \[10, 144\]"):
        gs.DistributedOptimizer(sgd(net.parameters()), net)


@pytest.mark.parametrize("family,text,message", [
    ("slicing", "fixed:abc", "unknown or malformed slicing policy 'fixed:abc'; valid: whole, fixed"),
    ("priority", "backward", "unknown or malformed priority policy 'backward'; valid: fifo, forward"),
    ("priority", "dgt", "priority 'dgt' is now collective 'dgt' (differential transmission over the parameter server): "
                        "use priority 'forward' and collective 'dgt[:alpha=A][:p0=P][:block=N]'"),
    ("codec", "qsgd3", 'codec "qsgd3": unknown codec "qsgd3"; valid: fp32, fp16'),
    ("collective", "rign", "unknown or malformed collective policy 'rign'; valid: ring, ps"),
    ("link", "fast", "unknown or malformed link policy 'fast'"),
])
def test_bad_policy_names(world, family, text, message):
    net = model()
    with pytest.raises(gs.ConfigError, match=re.escape(message)):
        gs.DistributedOptimizer(sgd(net.parameters()), net, **{family: text})


def test_policies_that_do_not_fit_together(world):
    net = model()
    with pytest.raises(gs.ConfigError, match=re.escape("collective 'dgt' sends its blocks as raw fp32 and needs a "
                                                       "lossless codec (fp32), not 'qsgd8'")):
        with gs.DistributedOptimizer(sgd(net.parameters()), net, codec="qsgd8", collective="dgt") as opt:
            train(net, opt, batches(world[0], 1))


def test_optimizers_that_cannot_step_per_module(world):
    net = model()
    with pytest.raises(gs.UsageError, match="LBFGS"):
        gs.DistributedOptimizer(torch.optim.LBFGS(net.parameters()), net)
    with pytest.raises(gs.UsageError, match=r"tensor of shape \[3\] in param group 1 that is not a parameter of the model"):
        gs.DistributedOptimizer(torch.optim.SGD([{"params": net.parameters()}, {"params": [torch.zeros(3)]}], lr=0.1), net)


@contextlib.contextmanager
def after_one_step(world, batches_left=1):
    """A DistributedOptimizer past its first step (its layout built), and the next batches' losses."""
    net = model()
    with gs.DistributedOptimizer(sgd(net.parameters()), net) as opt:
        data = batches(world[0], 1 + batches_left)
        train(net, opt, data[:1])
        yield opt, [F.cross_entropy(net(x), y) for x, y in data[1:]]


def test_zero_grad_between_backward_and_step(world):
    with after_one_step(world) as (opt, (loss,)):
        loss.backward()
        with pytest.raises(gs.UsageError, match=r"zero_grad\(\) between backward\(\) and step\(\) would discard "
                                                r"gradients in flight \(parameter '.*'\)"):
            opt.zero_grad()
        opt.step()


def test_more_backward_passes_than_declared(world, ddp_group):
    with after_one_step(world, 2) as (opt, (first, second)):
        first.backward()
        with pytest.raises(RuntimeError, match=r"parameter 'fc.bias' got another gradient .*"
                                               r"backward_passes_per_step \(1\)"):
            second.backward()
        dist.barrier()  # every rank saw its own error before any rank's abort can reach it
        opt.abort("the test stops here")


def test_non_finite_gradient_names_the_parameter(world, ddp_group):
    """Found as its units start, on every rank: inside backward() (autograd wraps it in a
    RuntimeError) or at the next wait (UsageError here, PeerError on a rank whose peer found it)."""
    with after_one_step(world) as (opt, (loss,)):
        with pytest.raises((RuntimeError, gs.UsageError), match=r"layer '[a-z0-9_.]+' has a non-finite gradient \(element \d+ is -?(nan|inf)"):
            (loss * float("inf")).backward()
            opt.synchronize()
        dist.barrier()  # every rank saw the error before any rank's abort can reach it
        opt.abort("the test stops here")


def test_a_rank_that_stops_fails_the_others_at_once(world):
    """No hang: a rank that gives up tells the others, whose next call raises naming it: PeerError
    from step/synchronize, or autograd's RuntimeError when the news lands during backward."""
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")
    net = model()
    with gs.DistributedOptimizer(sgd(net.parameters()), net, timeout=20) as opt:
        data = batches(world[0], 3)
        train(net, opt, data[:2])
        # The second iteration's aggregates land on every rank before the last one gives up;
        # otherwise the others would (rightly) fail already inside that iteration.
        opt.synchronize()
        dist.barrier()
        if world[0] == world[1] - 1:
            opt.abort("it ran out of data")
            return
        x, y = data[2]
        with pytest.raises((gs.PeerError, RuntimeError), match=f"rank {world[1] - 1}.*it ran out of data"):
            F.cross_entropy(net(x), y).backward()
            opt.step()
            opt.synchronize()

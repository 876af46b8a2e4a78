"""P3's point, seen from PyTorch: on a slow link the first layer's forward pass of the next
iteration starts while the last layer's units of the previous one are still on the wire - also
in a model compiled with torch.compile, where gradsync's hooks run at dynamo's graph breaks (the
same breaks with every backend: aot_eager here, since inductor's first compile takes most of a
minute on a loaded 2-core machine)."""
import time

import pytest
import torch
import torch.nn.functional as F

import gradsync.torch as gs
from helpers import batches, model, sgd


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_forward_starts_before_the_last_unit_arrives(world, compiled):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")
    if compiled:
        if not hasattr(torch, "compile"):
            pytest.skip("torch.compile is PyTorch 2.x")
        from torch import _dynamo
        _dynamo.reset()
    net = model(classes=3000)  # a 432k-parameter classifier last: 1.7 MB, 0.35 s at 40 Mbit/s
    starts = []
    with gs.DistributedOptimizer(sgd(net.parameters()), net, slicing="fixed:40000", link="40mbit",
                                  trace=True) as opt:
        net.conv1.register_forward_pre_hook(lambda *_: starts.append(time.monotonic_ns()))  # after gradsync's hook
        run = torch.compile(net, backend="aot_eager") if compiled else net
        for x, y in batches(world[0], 4, classes=3000):
            F.cross_entropy(run(x), y).backward()
            opt.step()
            opt.zero_grad()
        opt.synchronize()
        units = opt.trace()
        first_layer = {u for u, layers in enumerate(opt.unit_layers()) if 0 in layers}
        assert opt.layout()[0] == "conv1.weight"
    # Iteration 0 is stepped at once (the layout is built then); from iteration 1 on, steps wait
    # for the next forward pass.
    for i in (1, 2):
        last = max(u.finished_ns for u in units if u.iteration == i)
        first = max(u.finished_ns for u in units if u.iteration == i and u.unit in first_layer)
        assert first <= starts[i + 1] < last, (
            f"iteration {i + 1}'s forward started {(starts[i + 1] - last) / 1e6:+.0f} ms after the last unit of "
            f"iteration {i} arrived (its first layer's arrived {(first - last) / 1e6:+.0f} ms after)")

"""slicing "auto" (the default): rank 0 measures the link with rank 1, the tuner simulates its grid
on the first iteration's compute, and every rank builds rank 0's choice; at step tune_steady it
chooses again on the compute measured since."""
import re
import zlib

import pytest
import torch

import gradsync.torch as gs
from helpers import assert_replicas_identical, batches, model, run_gradsync, sgd


def trained(**kwargs):
    ours = run_gradsync(batches(gs.rank(), 3), **kwargs)
    return ours.tuning, ours.policies, ours.weights


def test_auto_is_the_default_and_every_rank_builds_rank_0s_choice(world):
    tuning, described, weights = trained()
    assert tuning is not None
    slicing = tuning["slicing"]
    assert slicing == "whole" or re.fullmatch(r"fixed:\d+", slicing), slicing
    assert described.startswith(("whole/" if slicing == "whole" else slicing + "/") + "forward/fp32/ring")
    assert tuning["inflight_units"] in (1, 2, 4) and tuning["credit_bytes"] in [m << 20 for m in (1, 2, 4, 8, 16)]
    # rank 0's choice on every rank, and replicas that stayed identical under it
    mine = torch.tensor([float(tuning["inflight_units"]), float(tuning["credit_bytes"]), float(zlib.crc32(slicing.encode()))],
                        dtype=torch.float64)
    assert torch.equal(gs.broadcast(mine.clone()), mine)
    assert_replicas_identical(weights)
    if world[1] == 1:
        assert tuning["link_bytes_per_second"] == 0  # nothing to measure: the choice for an idle link


def test_auto_measures_the_link_it_runs_on(world):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks (one rank has no link)")
    tuning, _, _ = trained(link="40mbit")
    rate = tuning["link_bytes_per_second"]
    assert 0.7 * 5e6 <= rate <= 1.2 * 5e6, f"measured {rate * 8 / 1e6:.1f} Mbit/s on a 40 Mbit/s link"
    assert tuning["link_latency_seconds"] > 0


def same_on_every_rank(choice):
    mine = torch.tensor([float(choice["inflight_units"]), float(choice["credit_bytes"]),
                         float(zlib.crc32((choice["slicing"] + choice["collective"]).encode())), choice["compute_seconds"]],
                        dtype=torch.float64)
    assert torch.equal(gs.broadcast(mine.clone()), mine), f"rank {gs.rank()}'s choice {choice} is not rank 0's"


def test_auto_chooses_again_on_the_steady_compute(world):
    steady = run_gradsync(batches(gs.rank(), 6), tune_steady=3)
    tuning = steady.tuning
    assert "first" in tuning, tuning
    # the second choice on rank 0's measured compute (the first iteration's profile scaled to it),
    # both rank 0's on every rank, and the Synchronizer built anew for the second
    assert tuning["compute_seconds"] > 0 and tuning["first"]["compute_seconds"] > 0
    same_on_every_rank(tuning)
    same_on_every_rank(tuning["first"])
    assert steady.policies.startswith(("whole" if tuning["slicing"] == "whole" else tuning["slicing"]) + "/forward/fp32/ring")
    assert_replicas_identical(steady.weights)
    # the same training as without it: the step that rebuilds applies every optimizer step at once
    plain = run_gradsync(batches(gs.rank(), 6), tune_steady=0)
    assert "first" not in plain.tuning
    for i, (a, b) in enumerate(zip(steady.weights, plain.weights)):
        if world[1] <= 2:  # x + y == y + x: any slicing gives the same sums bit for bit
            assert torch.equal(a, b), f"tensor {i} differs from the run without a second choice"
        else:  # three addends: the ring's order depends on the slicing
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_tune_steady_needs_iterations_to_measure(world):
    net = model()
    for steps in (1, 2):
        with pytest.raises(gs.ConfigError, match=f"tune_steady={steps} leaves no iteration to measure"):
            gs.DistributedOptimizer(sgd(net.parameters()), net, tune_steady=steps)


def test_auto_chooses_the_window_so_it_refuses_one(world):
    net = model()
    for knob in ("inflight_units", "credit_bytes"):
        with pytest.raises(gs.ConfigError, match="slicing 'auto' chooses the window too: leave inflight_units and "
                                                 "credit_bytes unset"):
            gs.DistributedOptimizer(sgd(net.parameters()), net, **{knob: 2 << 20})


def test_a_named_slicing_is_not_tuned(world):
    tuning, described, _ = trained(slicing="fixed:500")
    assert tuning is None
    assert described.startswith("fixed:500/forward/fp32/ring")

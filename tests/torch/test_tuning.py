"""slicing "auto" (the default): rank 0 measures the link with rank 1, the tuner simulates its grid
on the first iteration's compute, and every rank builds rank 0's choice."""
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

"""gradsync.torch against DDP (gloo, default buckets) on a conv net with batch norm, fp32: the
weights and the optimizer's state after every step applied.

2 ranks: DDP's mean of two gradients is (a + b) / 2 whatever the order of the sum, and so is
gradsync's: bit-identical. 3 ranks: the two sum in different orders, so they agree within fp32
rounding, while gradsync's replicas stay bit-identical (helpers.assert_matches_ddp)."""
import pytest

from helpers import adam, assert_matches_ddp, batches, run_ddp, run_gradsync, sgd


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["sgd_momentum", "adam"])
@pytest.mark.parametrize("policies", [dict(), dict(slicing="fixed:100", collective="ps"), dict(priority="fifo")],
                         ids=["p3_ring", "p3_sliced_ps", "wfbp"])
def test_same_weights_as_ddp(world, ddp_group, make_opt, policies):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")
    data = batches(world[0], 6)
    assert_matches_ddp(run_gradsync(data, make_opt=make_opt, **policies), run_ddp(data, make_opt=make_opt))

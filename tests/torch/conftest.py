"""What every gradsync.torch test shares: one thread per rank, the world, and DDP's process group.

Run under mpiexec (tests/torch/CMakeLists.txt: 2 and 3 ranks) or alone (a world of one): every
rank runs the same tests in the same order, so a test that needs another world size skips on all.
"""
import os
import tempfile

import pytest
import torch
import torch.distributed as dist

import gradsync.torch as gs

torch.set_num_threads(1)  # ranks share the cores; one thread also keeps the arithmetic identical
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # DDP's gloo and gradsync's collective 'gloo'


@pytest.fixture(scope="session")
def world():
    return gs.rank(), gs.size()


@pytest.fixture(scope="session")
def ddp_group(world):
    """DDP's process group (gloo over loopback), started once: a FileStore in a file rank 0 makes
    and tells the others through gradsync (no port to choose). No rank deletes the file: the
    store's last user does (FileStore counts its users out through the file), and a store whose
    file's directory is gone retries opening it until its timeout while the other ranks' MPI
    gives up on it."""
    rank, size = world
    path = torch.zeros(512, dtype=torch.uint8)
    if rank == 0:
        fd, name = tempfile.mkstemp(prefix="gradsync-ddp-store-")
        os.close(fd)
        path[: len(name)] = torch.tensor(list(name.encode()), dtype=torch.uint8)
    gs.broadcast(path)
    store = bytes(path[path != 0].tolist()).decode()
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=size)
    yield
    dist.destroy_process_group()

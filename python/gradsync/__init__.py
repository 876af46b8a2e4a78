"""gradsync: gradient synchronization for data-parallel training (P3's slicing and priorities,
gradient codecs, collectives over MPI). `gradsync.torch` attaches it to a PyTorch model."""

from ._build import version as __version__  # noqa: F401

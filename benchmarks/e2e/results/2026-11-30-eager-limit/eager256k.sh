#!/bin/bash
# gradsync-train with Open MPI's TCP eager limit at 256 KiB (default 64 KiB)
export OMPI_MCA_btl_tcp_eager_limit=262144
exec /work/main/build/default/trainer/gradsync-train "$@"

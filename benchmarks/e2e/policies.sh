# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by its callers
# The synchronization policies the e2e scripts compare (source it): gradsync-train flags, and the
# bits each gradient element costs on the wire, for the wire bound (QSGD-8: 8 bits plus a 32-bit
# scale per 512-element bucket). ddp is PyTorch's DistributedDataParallel (ddp.py).
declare -A POLICY_FLAGS=(
  [wfbp]="--slicing whole --priority fifo --codec fp32 --collective ring"
  [p3]="--slicing fixed:40000 --priority forward --codec fp32 --collective ring"
  [p3-fp16]="--slicing fixed:40000 --priority forward --codec fp16 --collective ring"
  [p3-qsgd8]="--slicing fixed:40000 --priority forward --codec qsgd8 --collective ring"
  [ps]="--slicing fixed:40000 --priority forward --codec fp32 --collective ps"
  # the same units summed by another library: Open MPI's MPI_Iallreduce, Gloo's ring (its own
  # sockets on the nodes' eth0, blocking waits; i8: 8 units at once to hide its per-message
  # rendezvous)
  [p3-mpi]="--slicing fixed:40000 --priority forward --codec fp32 --collective mpi"
  [p3-gloo]="--slicing fixed:40000 --priority forward --codec fp32 --collective gloo:eth0"
  [wfbp-gloo]="--slicing whole --priority fifo --codec fp32 --collective gloo:eth0"
  [p3-gloo-i8]="--slicing fixed:40000 --priority forward --codec fp32 --collective gloo:eth0 --inflight 8"
)
declare -A POLICY_BITS=([wfbp]=32 [p3]=32 [p3-fp16]=16 [p3-qsgd8]=8.0625 [ps]=32 [p3-mpi]=32 [p3-gloo]=32
  [wfbp-gloo]=32 [ddp]=32 [p3-gloo-i8]=32)
ALL_POLICIES=wfbp,p3,p3-fp16,p3-qsgd8,ps,ddp # the default sweep; the others on request (--policies)

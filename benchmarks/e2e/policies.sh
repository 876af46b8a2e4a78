# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by its callers
# The synchronization policies the e2e scripts compare (source it): gradsync-train flags, and the
# bits each gradient element costs on the wire, for the wire bound (QSGD-8: 8 bits plus a 32-bit
# scale per 512-element bucket; 1-bit: two 32-bit means per 64 elements; top-k 1%: a 32-bit index
# and value per kept element). The ddp* policies are PyTorch's DistributedDataParallel (ddp.py)
# with the communication hook DDP_HOOK names.
declare -A POLICY_FLAGS=(
  # gradsync-train as users run it without tuning flags: no --slicing, so under mpirun it tunes
  # for the link where it can (--slicing auto), else P3's fixed:40000 (--help says when)
  [default]="--codec fp32"
  [wfbp]="--slicing whole --priority fifo --codec fp32 --collective ring"
  [p3]="--slicing fixed:40000 --priority forward --codec fp32 --collective ring"
  [p3-fp16]="--slicing fixed:40000 --priority forward --codec fp16 --collective ring"
  [p3-qsgd8]="--slicing fixed:40000 --priority forward --codec qsgd8 --collective ring"
  [ps]="--slicing fixed:40000 --priority forward --codec fp32 --collective ps"
  # lossy codecs with error feedback, for time to accuracy against DDP + PowerSGD (--accuracy)
  [p3-onebit]="--slicing fixed:40000 --priority forward --codec onebit --collective ring"
  [p3-topk]="--slicing fixed:40000 --priority forward --codec topk:0.01 --collective ring"
  [p3-ef-qsgd4]="--slicing fixed:40000 --priority forward --codec ef+qsgd4 --collective ring"
  # the same units summed by another library: Open MPI's MPI_Iallreduce, Gloo's ring (its own
  # sockets on the nodes' eth0, blocking waits; i8: 8 units at once to hide its per-message
  # rendezvous)
  [p3-mpi]="--slicing fixed:40000 --priority forward --codec fp32 --collective mpi"
  [p3-gloo]="--slicing fixed:40000 --priority forward --codec fp32 --collective gloo:eth0"
  [wfbp-gloo]="--slicing whole --priority fifo --codec fp32 --collective gloo:eth0"
  [p3-gloo-i8]="--slicing fixed:40000 --priority forward --codec fp32 --collective gloo:eth0 --inflight 8"
)
# ddp: 25 MB buckets of fp32 (DDP's defaults); ddp-fp16: default_hooks.fp16_compress_hook;
# ddp-powersgd: powerSGD_hook in one bucket (ddp.py says why and with which settings)
declare -A DDP_HOOK=([ddp]=none [ddp-fp16]=fp16 [ddp-powersgd]=powersgd)
# (PowerSGD's bits per element depend on each matrix's shape and rank: "variable", no wire bound)
declare -A POLICY_BITS=([default]=32 [wfbp]=32 [p3]=32 [p3-fp16]=16 [p3-qsgd8]=8.0625 [ps]=32 [p3-onebit]=2 [p3-topk]=0.64
  [p3-ef-qsgd4]=4.0625 [p3-mpi]=32 [p3-gloo]=32 [wfbp-gloo]=32 [p3-gloo-i8]=32 [ddp]=32 [ddp-fp16]=16
  [ddp-powersgd]=variable)
ALL_POLICIES=default,wfbp,p3,p3-fp16,p3-qsgd8,ps,ddp,ddp-fp16 # the default sweep; the others on request (--policies)

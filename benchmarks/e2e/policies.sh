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
)
declare -A POLICY_BITS=([wfbp]=32 [p3]=32 [p3-fp16]=16 [p3-qsgd8]=8.0625 [ps]=32 [ddp]=32)
ALL_POLICIES=wfbp,p3,p3-fp16,p3-qsgd8,ps,ddp

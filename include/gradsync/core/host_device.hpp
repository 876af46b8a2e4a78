#pragma once
/// GRADSYNC_HD marks a function for the host and, under a CUDA compiler, the device too: the
/// codecs' kernels are functors with such bodies, run on either side (codec/detail/kernel.hpp),
/// and programs may write their own the same way (the trainer's layers).
#if defined(__CUDACC__)
#define GRADSYNC_HD __host__ __device__
#else
#define GRADSYNC_HD
#endif

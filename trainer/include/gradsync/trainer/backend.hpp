#pragma once
// The backend seam. Every elementwise / per-channel kernel in the trainer is a small functor with a
// `GRADSYNC_HD void operator()(std::size_t i) const` body; layers never loop themselves, they hand
// the functor to `backend::for_each`. The host backend runs it under OpenMP; a CUDA backend (issue 6)
// adds a `for_each` that launches the same functor on the device and a cuBLAS `gemm`, and switches
// the `backend` alias below (GRADSYNC_TRAINER_CUDA) - the layers and models do not change.
#include <omp.h>

#include <cstddef>

#if defined(GRADSYNC_TRAINER_CUDA)
#include <cuda_runtime.h>
#endif

// GRADSYNC_HD (host + device) is the library's marker, shared with its codec kernels.
#include <gradsync/codec/detail/kernel.hpp>

namespace gradsync::trainer {

namespace host {

/// f(i) for i in [lo, hi). f is taken by value: a local copy whose pointer members the compiler can
/// keep in registers, so simple kernels vectorize.
template <class F>
void run_range(const F f, std::size_t lo, std::size_t hi) {
  for (std::size_t i = lo; i < hi; ++i) f(i);
}

/// Runs f(i) for i in [0, n). Parallel (OpenMP, this thread's team size) only when the work is
/// large (about a millisecond): every parallel region is a barrier, and on a shared machine a
/// descheduled team member stalls it for a whole time slice. `grain` = work per index, in rough
/// float operations.
template <class F>
void for_each(std::size_t n, const F& f, std::size_t grain = 1) {
  if (n * grain < (std::size_t(1) << 21) || n < 2 || omp_get_max_threads() < 2) {
    run_range(f, 0, n);
    return;
  }
#pragma omp parallel
  {
    const std::size_t t = std::size_t(omp_get_thread_num()), team = std::size_t(omp_get_num_threads());
    run_range(f, n * t / team, n * (t + 1) / team);
  }
}

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C (Eigen, OpenMP-threaded).
/// lda/ldb/ldc are the row strides of A, B, C as stored (before op).
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc);

/// Sum of squares in double (LARS norms).
double sum_squares(const float* x, std::size_t n);

/// Threads used by this thread's kernels (OpenMP team size and Eigen's GEMM threads).
void set_threads(int threads);
int threads();

}  // namespace host

#if defined(GRADSYNC_TRAINER_CUDA)
/// The device backend (gradsync_trainer_cuda): the same functors as __global__ grid-stride loops,
/// GEMM on cuBLAS; everything of a thread (rank) is ordered on that thread's stream.
namespace cuda {

cudaStream_t stream();
/// Throws std::runtime_error naming the call and the CUDA error.
void check(cudaError_t e, const char* what);
/// Stream-ordered device memory (cudaMallocAsync / cudaFreeAsync on this thread's stream).
void* allocate(std::size_t bytes);
void release(void* p);
/// Any direction (unified addressing), ordered on the stream; host memory is safe to reuse only
/// after synchronize().
void copy(void* dst, const void* src, std::size_t bytes);
void synchronize();

#if defined(__CUDACC__)
template <class F>
__global__ void for_each_kernel(std::size_t n, F f) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    f(i);
}
/// f(i) for i in [0, n) on the device; `grain` is the host's threading hint, unused here.
template <class F>
void for_each(std::size_t n, const F& f, std::size_t grain = 1) {
  (void)grain;
  if (n == 0) return;
  constexpr unsigned block = 256;
  const std::size_t blocks = (n + block - 1) / block;
  for_each_kernel<<<unsigned(blocks < 65535 ? blocks : 65535), block, 0, stream()>>>(n, f);
  check(cudaGetLastError(), "kernel launch");
}
#endif

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc);
double sum_squares(const float* x, std::size_t n);
void set_threads(int threads);
int threads();

}  // namespace cuda

namespace backend = cuda;
#else
namespace backend = host;
#endif

}  // namespace gradsync::trainer

#pragma once
// The backend seam. Every elementwise / per-channel kernel in the trainer is a small functor with a
// `GRADSYNC_HD void operator()(std::size_t i) const` body; layers never loop themselves, they hand
// the functor to `backend::for_each`. The host backend splits it over the calling thread's team; a CUDA backend
// adds a `for_each` that launches the same functor on the device and a cuBLAS `gemm`, and switches
// the `backend` alias below (GRADSYNC_TRAINER_CUDA) - the layers and models do not change.

#include <cstddef>

#if defined(GRADSYNC_TRAINER_CUDA)
#include <cuda_runtime.h>
#if defined(__CUDACC__)
#include <cub/block/block_reduce.cuh>
#endif
#endif

// GRADSYNC_HD (host + device) is the library's marker, shared with its codec kernels.
#include <gradsync/core/host_device.hpp>

namespace gradsync::trainer {

namespace detail {
/// f(r, j) as a function of j.
template <class F>
struct BoundRow {
  const F& f;
  std::size_t r;
  GRADSYNC_HD auto operator()(std::size_t j) const { return f(r, j); }
};
/// Row r of a 2-D functor as a function of j on the host: f.row(r) where the functor has one (it
/// loads the row's per-channel values once, into locals the j loop can keep in registers and
/// vectorize over), else f(r, j).
template <class F>
GRADSYNC_HD auto row_of(const F& f, std::size_t r) {
  if constexpr (requires { f.row(r); }) return f.row(r);
  else return BoundRow<F>{f, r};
}
/// Row r of a for_each_2d: f(r, j) for every j, in one host thread (the j loop vectorizes).
template <class F>
struct RowLoop {
  F f;
  std::size_t cols;
  GRADSYNC_HD void operator()(std::size_t r) const {
    const auto g = row_of(f, r);
    for (std::size_t j = 0; j < cols; ++j) g(j);
  }
};
/// The sum of g(j) for j in [0, cols): 8 independent float lanes combined in a fixed order in
/// double, which vectorizes (one running double would be a 4-cycle dependency per term).
template <class G>
GRADSYNC_HD double lane_sum(const G& g, std::size_t cols) {
  float lane[8] = {};
  std::size_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (std::size_t l = 0; l < 8; ++l) lane[l] += g(j + l);
  double s = 0.0;
  for (; j < cols; ++j) s += g(j);
  for (float v : lane) s += v;
  return s;
}
/// Row r of a host reduce_rows (lane_sum).
template <class F>
struct RowSum {
  F f;
  std::size_t cols;
  float* out;
  double scale;
  GRADSYNC_HD void operator()(std::size_t r) const { out[r] = float(lane_sum(row_of(f, r), cols) * scale); }
};
/// Element i of a for_each_2d on a device: one per thread, neighbouring threads on neighbouring j.
template <class F>
struct ElementOf {
  F f;
  std::size_t cols;
  GRADSYNC_HD void operator()(std::size_t i) const { f(i / cols, i % cols); }
};
}  // namespace detail

namespace host {

/// Threads used by this thread's kernels: a team of its own per calling thread (each rank thread
/// sets its share). 1 inside a team's parallel part, so nested kernels run serially.
void set_threads(int threads);
int threads();

/// f(i) for i in [lo, hi). f is taken by value: a local copy whose pointer members the compiler can
/// keep in registers, so simple kernels vectorize.
template <class F>
void run_range(const F f, std::size_t lo, std::size_t hi) {
  for (std::size_t i = lo; i < hi; ++i) f(i);
}

/// Runs body(ctx, t, team) for t in [0, team) on this thread's team (set_threads; t = 0 runs on
/// the caller) and returns when every part is done. Idle members poll briefly, then sleep.
void run_team(void (*body)(const void* ctx, std::size_t t, std::size_t team), const void* ctx);

/// Runs f(i) for i in [0, n). Parallel (this thread's team) only when the work outweighs a wake-up
/// (2^16 rough float operations, tens of microseconds: ResNet-20's batch norm, ReLU and residual
/// passes, a third of its step, ran serially at 2^21 and took 2 threads 1.4x longer). `grain` = work
/// per index, in rough float operations.
template <class F>
void for_each(std::size_t n, const F& f, std::size_t grain = 1) {
  if (n * grain < (std::size_t(1) << 16) || n < 2 || threads() < 2) {
    run_range(f, 0, n);
    return;
  }
  const auto part = [&](std::size_t t, std::size_t team) { run_range(f, n * t / team, n * (t + 1) / team); };
  run_team([](const void* c, std::size_t t, std::size_t team) { (*static_cast<const decltype(part)*>(c))(t, team); },
           &part);
}

/// f(r, j) for r in [0, rows), j in [0, cols): a row per index here; a functor that also has a
/// row form f(r) (bounds-free inner loops) runs that instead. The device runs one (r, j) per thread.
template <class F>
void for_each_2d(std::size_t rows, std::size_t cols, const F& f) {
  if constexpr (requires { f(std::size_t{}); }) for_each(rows, f, cols);
  else for_each(rows, detail::RowLoop<F>{f, cols}, cols);
}

/// out[r] = scale * the sum over j in [0, cols) of f(r, j) (a float term), for r in [0, rows):
/// a row per index here (RowSum); the device sums each row in a thread block.
template <class F>
void reduce_rows(std::size_t rows, std::size_t cols, const F& f, float* out, double scale = 1.0) {
  for_each(rows, detail::RowSum<F>{f, cols, out, scale}, cols);
}

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C (Eigen, split over this thread's team).
/// lda/ldb/ldc are the row strides of A, B, C as stored (before op).
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc);

/// Sum of squares in double (LARS norms).
double sum_squares(const float* x, std::size_t n);

/// Mixed precision: this thread's GEMM inputs are fp16 values. The host multiplies them in fp32
/// (exact for fp16 inputs, fp32 accumulation); the device on fp16 tensor cores.
inline void set_fp16_gemm(bool) {}

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
/// A host-to-device copy that does not wait for the device, in two steps: staging(bytes) returns
/// this thread's pinned buffer (free again once the previous upload from it has left), the caller
/// fills it, upload(dst, bytes) sends it on the stream.
void* staging(std::size_t bytes);
void upload(void* dst, std::size_t bytes);

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
/// f(r, j) for r in [0, rows), j in [0, cols), one element per thread (the element form).
template <class F>
void for_each_2d(std::size_t rows, std::size_t cols, const F& f) {
  for_each(rows * cols, detail::ElementOf<F>{f, cols});
}

inline constexpr unsigned reduce_threads = 256;
template <class F>
__global__ void __launch_bounds__(reduce_threads) reduce_rows_kernel(std::size_t cols, F f, float* out, double scale) {
  using Reduce = cub::BlockReduce<float, reduce_threads>;
  __shared__ typename Reduce::TempStorage temp;
  const std::size_t r = blockIdx.x;
  float acc = 0.0f;
  for (std::size_t j = threadIdx.x; j < cols; j += reduce_threads) acc += f(r, j);
  const float total = Reduce(temp).Sum(acc);
  if (threadIdx.x == 0) out[r] = float(double(total) * scale);
}
/// out[r] = scale * the sum over j of f(r, j): one thread block per row (coalesced reads), the
/// host's terms in a different order (results agree to rounding).
template <class F>
void reduce_rows(std::size_t rows, std::size_t cols, const F& f, float* out, double scale = 1.0) {
  if (rows == 0) return;
  reduce_rows_kernel<<<unsigned(rows), reduce_threads, 0, stream()>>>(cols, f, out, scale);
  check(cudaGetLastError(), "kernel launch");
}
#endif

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc);
double sum_squares(const float* x, std::size_t n);
/// On: cuBLAS multiplies in fp16 with fp32 accumulation (CUBLAS_COMPUTE_32F_FAST_16F: tensor
/// cores; exact down-conversion, as mixed precision stores every GEMM input in fp16).
void set_fp16_gemm(bool on);
/// Whether this thread's GEMM inputs are fp16 values: cuDNN's convolutions follow it too.
bool fp16_gemm();
void set_threads(int threads);
int threads();

}  // namespace cuda

namespace backend = cuda;
#else
namespace backend = host;
#endif

}  // namespace gradsync::trainer

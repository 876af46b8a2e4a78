// The device backend (GRADSYNC_TRAINER_CUDA): per-thread streams and cuBLAS handles, stream-ordered
// memory, GEMM through cuBLAS and the LARS norm through Thrust on the rank's stream.
#include "gradsync/trainer/backend.hpp"

#include <cublas_v2.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform_reduce.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace gradsync::trainer::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

namespace {
void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS: ") + what + " failed with status " + std::to_string(int(s)));
}

// One stream and one cuBLAS handle per thread: each in-process rank orders its own work.
struct ThreadContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  bool fp16 = false;  // set_fp16_gemm
  void* pinned = nullptr;  // staging
  std::size_t pinned_bytes = 0;
  cudaEvent_t uploaded = nullptr;  // the last upload from `pinned` has left
  ThreadContext() {
    // The first CUDA call of a thread: where a machine without a usable GPU is found out.
    if (const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
      throw std::runtime_error(std::string("CUDA: no usable GPU (") + cudaGetErrorString(e) +
                               "): run gradsync-train (the host build) here, or check the NVIDIA driver and "
                               "CUDA_VISIBLE_DEVICES");
    // The default pool hands freed memory back to the driver at every synchronization, and the
    // next iteration maps it again: a training step frees and allocates the same sizes each time.
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    check_blas(cublasCreate(&blas), "cublasCreate");
    check_blas(cublasSetStream(blas, stream), "cublasSetStream");
  }
  ~ThreadContext() {
    if (uploaded) cudaEventDestroy(uploaded);
    if (pinned) cudaFreeHost(pinned);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
};
ThreadContext& context() {
  thread_local ThreadContext c;
  return c;
}

struct Square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};
}  // namespace

cudaStream_t stream() { return context().stream; }

void* allocate(std::size_t bytes) {
  void* p = nullptr;
  if (bytes) check(cudaMallocAsync(&p, bytes, stream()), "cudaMallocAsync");
  return p;
}
void release(void* p) {
  if (p) cudaFreeAsync(p, stream());  // no throw: called from destructors
}
void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()), "cudaMemcpyAsync");
}
void synchronize() { check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"); }

void* staging(std::size_t bytes) {
  ThreadContext& c = context();
  if (c.uploaded) check(cudaEventSynchronize(c.uploaded), "cudaEventSynchronize");
  else check(cudaEventCreateWithFlags(&c.uploaded, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (bytes > c.pinned_bytes) {
    if (c.pinned) check(cudaFreeHost(c.pinned), "cudaFreeHost");
    c.pinned = nullptr;
    check(cudaMallocHost(&c.pinned, bytes), "cudaMallocHost");
    c.pinned_bytes = bytes;
  }
  return c.pinned;
}
void upload(void* dst, std::size_t bytes) {
  ThreadContext& c = context();
  copy(dst, c.pinned, bytes);
  check(cudaEventRecord(c.uploaded, c.stream), "cudaEventRecord");
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the row-major buffers read as
// column-major are the transposes, so B and A swap places and keep their own op.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  ThreadContext& ctx = context();
  check_blas(cublasGemmEx(ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n),
                          int(m), int(k), &alpha, b, CUDA_R_32F, int(ldb), a, CUDA_R_32F, int(lda), &beta, c,
                          CUDA_R_32F, int(ldc), ctx.fp16 ? CUBLAS_COMPUTE_32F_FAST_16F : CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT),
             ctx.fp16 ? "cublasGemmEx (fp16 inputs, fp32 accumulation)" : "cublasGemmEx (fp32)");
}

void set_fp16_gemm(bool on) { context().fp16 = on; }
bool fp16_gemm() { return context().fp16; }

double sum_squares(const float* x, std::size_t n) {
  return thrust::transform_reduce(thrust::cuda::par.on(stream()), x, x + n, Square{}, 0.0, thrust::plus<double>());
}

void set_threads(int) {}
int threads() { return 1; }

}  // namespace gradsync::trainer::cuda

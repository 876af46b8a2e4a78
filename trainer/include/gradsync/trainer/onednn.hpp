#pragma once
// oneDNN (Debian's libdnnl, the library behind PyTorch's CPU convolutions) for the host build:
// the convolutions and every GEMM (host::gemm). Host-only: the device build
// (GRADSYNC_TRAINER_CUDA) neither includes nor links it.
//
// Tensors go in and come out plain (NCHW activations, OIHW weights, fp32 contiguous): the
// gradients handed to the synchronizer keep their layout. Inside, each primitive works in the
// format oneDNN prefers (blocked, e.g. nChw16c), with a reorder wherever the two differ.
//
// Threads: the calling thread's team (host::threads()) splits the batch, and oneDNN runs each
// slice single-threaded (its OpenMP runtime is held at one thread per calling thread). So each
// in-process rank keeps its own share, idle members sleep instead of spinning as OpenMP's do, and
// the results are bit-identical run to run for a given team size: the members' weight-gradient
// partial sums are added in member order.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace gradsync::trainer::onednn {

/// Holds oneDNN's OpenMP runtime at one thread for the calling thread (OpenMP's thread count is a
/// per-thread setting, read when a primitive is created and when it runs): call it in every
/// thread before oneDNN works there.
void single_threaded();

/// Row-major C[m x n] = alpha * op(A) * op(B) + beta * C on the calling thread alone (oneDNN's
/// sgemm, its JIT kernels); lda/ldb/ldc are the row strides as stored. host::gemm splits large
/// products over the team with it.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);

/// A 2-D convolution's fixed geometry (square kernel, equal stride and padding on both axes).
struct ConvGeometry {
  std::size_t in = 0, out = 0, kernel = 1, stride = 1, pad = 0;
  bool bias = false;
};

/// oneDNN primitives for one convolution layer, created once per input shape (and team size)
/// and kept. Holds the last training forward's input (in the forward's format) for the weight gradient.
///
/// \code
///   onednn::Convolution conv({.in = 16, .out = 32, .kernel = 3, .stride = 1, .pad = 1});
///   conv.forward(x, n, h, w, weight, nullptr, y, true);     // y: [n, 32, oh, ow]
///   conv.backward_weights(dy, dweight, nullptr);           // dweight: [32, 16, 3, 3]
///   conv.backward_data(dy, weight, dx);                    // dx: [n, 16, h, w]
/// \endcode
class Convolution {
 public:
  explicit Convolution(ConvGeometry g);
  ~Convolution();
  Convolution(const Convolution&) = delete;
  Convolution& operator=(const Convolution&) = delete;

  /// y = conv(x, weight) + bias (bias may be null when the geometry has none); x [n, in, h, w].
  /// `training` keeps x for backward_weights.
  void forward(const float* x, std::size_t n, std::size_t h, std::size_t w, const float* weight, const float* bias,
               float* y, bool training);
  /// dweight [out, in, k, k] (and dbias [out]) of the last training forward, from dy [n, out, oh, ow].
  void backward_weights(const float* dy, float* dweight, float* dbias);
  /// dx [n, in, h, w] of the last training forward, from the same dy (after backward_weights).
  void backward_data(const float* dy, const float* weight, float* dx);
  /// The last forward's batch and input size.
  struct Extent {
    std::size_t n = 0, h = 0, w = 0;
  };
  Extent input() const;
  /// Implementation names oneDNN picked for the last forward's shape (forward, backward data,
  /// backward weights), e.g. "jit:avx512_core"; for tests and diagnostics.
  std::vector<std::string> implementations() const;

 public:
  struct Plan;  // defined (and used) in onednn_conv.cpp only

 private:
  Plan& plan_for(std::size_t n, std::size_t h, std::size_t w);
  void require_training_forward(const char* what) const;

  ConvGeometry g_;
  std::vector<std::unique_ptr<Plan>> plans_;  // one per (input shape, team size) seen
  Plan* last_ = nullptr;                      // the last forward's
  bool trained_ = false;                      // the last forward kept its input
};

}  // namespace gradsync::trainer::onednn

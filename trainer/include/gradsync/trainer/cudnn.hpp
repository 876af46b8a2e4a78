#pragma once
// Convolutions and batch normalization through cuDNN: the device build's Conv2d and BatchNorm2d
// (GRADSYNC_TRAINER_CUDNN, set when cuDNN is found next to the CUDA toolkit), the library PyTorch
// uses, on NCHW fp32 tensors. The host build keeps its im2col + GEMM and per-channel kernels.
//
// Math follows the thread's GEMM contract (backend.hpp, cuda::set_fp16_gemm):
//   fp32:  fp32 FMA only (CUDNN_FMA_MATH: no TF32, which would round the inputs to 10 bits);
//   mixed: the inputs are fp16 values stored as fp32 (mixed_precision.hpp), so cuDNN may convert
//          them to fp16 for the tensor cores (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) - exactly,
//          with fp32 accumulation and fp32 outputs, as cuBLAS's CUBLAS_COMPUTE_32F_FAST_16F.
// Each layer times every algorithm once per input shape and math mode (cudnnFind*, as PyTorch's
// cudnn.benchmark) and keeps the fastest deterministic one (no atomics: equal inputs give equal
// bits; which algorithm wins may differ between runs) within 1 GiB of workspace; in mixed mode
// only where the conversion stays exact: GEMM forms, or Winograd/FFT in fp32 FMA (their
// transformed values are no fp16 values). Workspace: one buffer per thread (rank), grown to the
// largest chosen algorithm's need.
#include <cstddef>
#include <memory>
#include <vector>

#include "gradsync/trainer/tensor.hpp"

namespace gradsync::trainer::cudnn {

/// A Conv2d's convolution (no dilation, no groups) through cuDNN.
class Convolution {
 public:
  Convolution(std::size_t in, std::size_t out, std::size_t kernel, std::size_t stride, std::size_t pad);
  ~Convolution();
  Convolution(const Convolution&) = delete;
  Convolution& operator=(const Convolution&) = delete;

  /// y = x * w (+ bias per output channel; bias may be null). y has the output shape already.
  void forward(const Tensor& x, const Tensor& w, const float* bias, Tensor& y);
  /// dw (and dbias, unless null) from the forward's input x and the output gradient dy; overwritten.
  void backward_filter(const Tensor& x, const Tensor& dy, float* dw, float* dbias);
  /// dx (the input's shape) from w and dy; overwritten.
  void backward_data(const Tensor& w, const Tensor& dy, Tensor& dx);

 private:
  struct Plan;
  Plan& plan(const Shape& x);  // this input shape's, under the thread's math mode

  std::size_t in_, out_, k_, stride_, pad_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

/// A BatchNorm2d through cuDNN (spatial mode: per channel over N, H, W; [N, C] is N x C x 1 x 1).
/// The host layer's semantics: biased batch variance in the normalization, running statistics
/// r = (1 - momentum) r + momentum * batch value with the unbiased variance, as PyTorch.
class BatchNorm {
 public:
  explicit BatchNorm(std::size_t channels);
  ~BatchNorm();
  BatchNorm(const BatchNorm&) = delete;
  BatchNorm& operator=(const BatchNorm&) = delete;

  /// Training: y from the batch's statistics, the running ones updated; keeps x and the batch
  /// statistics for backward.
  void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& running_mean,
                        Tensor& running_var, float momentum, float eps);
  /// Evaluation: y from the running statistics.
  void forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                         const Tensor& running_mean, const Tensor& running_var, float eps);
  /// dx, dgamma and dbeta (overwritten) for the last training forward.
  void backward(const Tensor& dy, const Tensor& gamma, Tensor& dx, float* dgamma, float* dbeta);

 private:
  struct Plan;
  Plan& plan(const Shape& x);

  std::size_t c_;
  float eps_ = 0.0f;              // of the last training forward: backward must use the same
  Tensor input_, mean_, inv_std_;  // the last training forward's input and batch statistics
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace gradsync::trainer::cudnn

// cuDNN for the device build's Conv2d and BatchNorm2d (cudnn.hpp): cuDNN 9's legacy descriptor
// API (cudnnFind*, cudnnConvolution*, cudnnBatchNormalization*), one handle per thread (rank) on
// that thread's stream.
#include "gradsync/trainer/cudnn.hpp"

#include <cudnn.h>

#include <climits>
#include <stdexcept>
#include <string>

#include <gradsync/core/error.hpp>

#include "gradsync/trainer/backend.hpp"

namespace gradsync::trainer::cudnn {

namespace {

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string("cuDNN: ") + what + ": " + cudnnGetErrorString(s));
}

int dim(std::size_t v, const Shape& shape) {
  if (v > std::size_t(INT_MAX)) throw UsageError("cuDNN: tensor " + to_string(shape) + " has a dimension beyond 2^31");
  return int(v);
}

// An algorithm may use at most this much workspace (cuDNN's FFT algorithms can ask for more).
constexpr std::size_t max_workspace = std::size_t(1) << 30;

// The thread's handle and its workspace, shared by the thread's layers (their calls are ordered on
// its stream).
struct Handle {
  cudnnHandle_t h = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  Handle() {
    check(cudnnCreate(&h), "cudnnCreate");
    check(cudnnSetStream(h, cuda::stream()), "cudnnSetStream");
  }
  ~Handle() {
    cuda::release(workspace);
    cudnnDestroy(h);
  }
  void* reserve(std::size_t need) {
    if (need > bytes) {
      cuda::release(workspace);
      workspace = cuda::allocate(need);
      bytes = need;
    }
    return workspace;
  }
};
Handle& handle() {
  thread_local Handle h;
  return h;
}

cudnnMathType_t mode_math(bool half) { return half ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH; }

// Algorithms that multiply the inputs themselves (GEMM forms): converting fp16 values to fp16 is
// exact there, while Winograd and FFT would round their transformed values if not in fp32 FMA.
bool gemm_form(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool gemm_form(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool gemm_form(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// cuDNN's non-fused Winograd transforms kernels larger than 3x3 with larger tiles, whose fp32
// rounding strays beyond fp32's precision: on an H200 (cuDNN 9.19) a 5x5 convolution's input
// gradient came out 8e-4 of its largest value off a double-precision reference in the runs where
// it was timed fastest (benchmarks/gpu/results/2026-11-28-h200-run5). Fused Winograd takes 3x3
// kernels only.
bool coarse_winograd(cudnnConvolutionFwdAlgo_t a, std::size_t k) {
  return k > 3 && a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool coarse_winograd(cudnnConvolutionBwdDataAlgo_t a, std::size_t k) {
  return k > 3 && a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool coarse_winograd(cudnnConvolutionBwdFilterAlgo_t a, std::size_t k) {
  return k > 3 && a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

void set_4d(cudnnTensorDescriptor_t d, const Shape& shape, std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
  check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dim(n, shape), dim(c, shape), dim(h, shape),
                                   dim(w, shape)),
        "cudnnSetTensor4dDescriptor");
}

const float one = 1.0f, zero = 0.0f;

}  // namespace

// ---- Convolution ----

template <class Algo>
struct Choice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  bool made = false;
};

struct Convolution::Plan {
  Shape x;
  std::size_t k = 0;  // the kernel's size
  bool half = false;
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr, bias_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> fwd;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;

  ~Plan() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w_desc);
    cudnnDestroyTensorDescriptor(bias_desc);
    cudnnDestroyTensorDescriptor(y_desc);
    cudnnDestroyTensorDescriptor(x_desc);
  }

  // Times every algorithm on this shape (cudnnFind*: `find(capacity, &returned, results)`, after
  // `max_count(handle, &capacity)`) and keeps the fastest that succeeded, is deterministic and fits
  // max_workspace and is no coarse Winograd; mixed plans only a GEMM form or fp32 FMA math
  // (gemm_form). fp32 plans stay on FMA math whatever the result reports; mixed ones take the math
  // type the algorithm was timed with.
  template <class Perf, class Find>
  Choice<decltype(Perf::algo)> choose(const char* what, cudnnStatus_t (*max_count)(cudnnHandle_t, int*),
                                      Find&& find) const {
    int count = 0;
    check(max_count(handle().h, &count), what);
    check(cudnnSetConvolutionMathType(conv, mode_math(half)), "cudnnSetConvolutionMathType");
    std::vector<Perf> results(std::size_t(count > 0 ? count : 1));
    int returned = 0;
    check(find(int(results.size()), &returned, results.data()), what);
    for (int i = 0; i < returned; ++i) {
      const Perf& r = results[std::size_t(i)];
      const bool exact = (!half || gemm_form(r.algo) || r.mathType == CUDNN_FMA_MATH) && !coarse_winograd(r.algo, k);
      if (r.status == CUDNN_STATUS_SUCCESS && r.determinism == CUDNN_DETERMINISTIC && r.memory <= max_workspace && exact)
        return {r.algo, half ? r.mathType : CUDNN_FMA_MATH, r.memory, true};
    }
    throw std::runtime_error(std::string("cuDNN: no deterministic ") + (half ? "fp16-exact " : "") + what +
                             " algorithm for input " + to_string(x) + " within " + std::to_string(max_workspace >> 20) +
                             " MiB of workspace; pin this Conv2d to Lowering::batched (im2col + cuBLAS)");
  }
  // The workspace of `c`, with the convolution's math set to c's.
  template <class Algo>
  void* use(const Choice<Algo>& c) const {
    check(cudnnSetConvolutionMathType(conv, c.math), "cudnnSetConvolutionMathType");
    return handle().reserve(c.workspace);
  }
};

Convolution::Convolution(std::size_t in, std::size_t out, std::size_t kernel, std::size_t stride, std::size_t pad)
    : in_(in), out_(out), k_(kernel), stride_(stride), pad_(pad) {}

Convolution::~Convolution() = default;

Convolution::Plan& Convolution::plan(const Shape& x) {
  const bool half = cuda::fp16_gemm();
  for (auto& p : plans_)
    if (p->x == x && p->half == half) return *p;
  auto p = std::make_unique<Plan>();
  p->x = x;
  p->k = k_;
  p->half = half;
  const std::size_t n = x.at(0), h = x.at(2), w = x.at(3);
  const std::size_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  check(cudnnCreateTensorDescriptor(&p->x_desc), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&p->y_desc), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&p->bias_desc), "cudnnCreateTensorDescriptor");
  check(cudnnCreateFilterDescriptor(&p->w_desc), "cudnnCreateFilterDescriptor");
  check(cudnnCreateConvolutionDescriptor(&p->conv), "cudnnCreateConvolutionDescriptor");
  set_4d(p->x_desc, x, n, in_, h, w);
  set_4d(p->y_desc, x, n, out_, oh, ow);
  set_4d(p->bias_desc, x, 1, out_, 1, 1);
  check(cudnnSetFilter4dDescriptor(p->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, dim(out_, x), dim(in_, x),
                                   dim(k_, x), dim(k_, x)),
        "cudnnSetFilter4dDescriptor");
  // Cross-correlation, as the host's im2col (no kernel flip); fp32 accumulation in both modes.
  check(cudnnSetConvolution2dDescriptor(p->conv, dim(pad_, x), dim(pad_, x), dim(stride_, x), dim(stride_, x), 1, 1,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  plans_.push_back(std::move(p));
  return *plans_.back();
}

void Convolution::forward(const Tensor& x, const Tensor& w, const float* bias, Tensor& y) {
  Plan& p = plan(x.shape());
  const cudnnHandle_t h = handle().h;
  if (!p.fwd.made)
    p.fwd = p.choose<cudnnConvolutionFwdAlgoPerf_t>("forward", cudnnGetConvolutionForwardAlgorithmMaxCount,
                                                    [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
      return cudnnFindConvolutionForwardAlgorithm(h, p.x_desc, p.w_desc, p.conv, p.y_desc, n, got, r);
    });
  void* ws = p.use(p.fwd);
  check(cudnnConvolutionForward(h, &one, p.x_desc, x.data(), p.w_desc, w.data(), p.conv, p.fwd.algo, ws,
                                p.fwd.workspace, &zero, p.y_desc, y.data()),
        "cudnnConvolutionForward");
  if (bias) check(cudnnAddTensor(h, &one, p.bias_desc, bias, &one, p.y_desc, y.data()), "cudnnAddTensor (bias)");
}

void Convolution::backward_filter(const Tensor& x, const Tensor& dy, float* dw, float* dbias) {
  Plan& p = plan(x.shape());
  const cudnnHandle_t h = handle().h;
  if (!p.bwd_filter.made)
    p.bwd_filter = p.choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        "backward filter", cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
          return cudnnFindConvolutionBackwardFilterAlgorithm(h, p.x_desc, p.y_desc, p.conv, p.w_desc, n, got, r);
        });
  void* ws = p.use(p.bwd_filter);
  check(cudnnConvolutionBackwardFilter(h, &one, p.x_desc, x.data(), p.y_desc, dy.data(), p.conv, p.bwd_filter.algo, ws,
                                       p.bwd_filter.workspace, &zero, p.w_desc, dw),
        "cudnnConvolutionBackwardFilter");
  if (dbias)
    check(cudnnConvolutionBackwardBias(h, &one, p.y_desc, dy.data(), &zero, p.bias_desc, dbias),
          "cudnnConvolutionBackwardBias");
}

void Convolution::backward_data(const Tensor& w, const Tensor& dy, Tensor& dx) {
  Plan& p = plan(dx.shape());
  const cudnnHandle_t h = handle().h;
  if (!p.bwd_data.made)
    p.bwd_data = p.choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        "backward data", cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
          return cudnnFindConvolutionBackwardDataAlgorithm(h, p.w_desc, p.y_desc, p.conv, p.x_desc, n, got, r);
        });
  void* ws = p.use(p.bwd_data);
  check(cudnnConvolutionBackwardData(h, &one, p.w_desc, w.data(), p.y_desc, dy.data(), p.conv, p.bwd_data.algo, ws,
                                     p.bwd_data.workspace, &zero, p.x_desc, dx.data()),
        "cudnnConvolutionBackwardData");
}

// ---- BatchNorm ----

struct BatchNorm::Plan {
  Shape x;
  cudnnTensorDescriptor_t x_desc = nullptr, param_desc = nullptr;  // x as N x C x S x 1; 1 x C x 1 x 1
  ~Plan() {
    cudnnDestroyTensorDescriptor(param_desc);
    cudnnDestroyTensorDescriptor(x_desc);
  }
};

BatchNorm::BatchNorm(std::size_t channels) : c_(channels) {}

BatchNorm::~BatchNorm() = default;

BatchNorm::Plan& BatchNorm::plan(const Shape& x) {
  for (auto& p : plans_)
    if (p->x == x) return *p;
  auto p = std::make_unique<Plan>();
  p->x = x;
  const std::size_t n = x.at(0);
  check(cudnnCreateTensorDescriptor(&p->x_desc), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&p->param_desc), "cudnnCreateTensorDescriptor");
  set_4d(p->x_desc, x, n, c_, product(x) / (n * c_), 1);
  check(cudnnDeriveBNTensorDescriptor(p->param_desc, p->x_desc, CUDNN_BATCHNORM_SPATIAL), "cudnnDeriveBNTensorDescriptor");
  plans_.push_back(std::move(p));
  return *plans_.back();
}

void BatchNorm::forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& running_mean, Tensor& running_var, float momentum, float eps) {
  const Plan& p = plan(x.shape());
  input_ = x;
  mean_.resize({c_});
  inv_std_.resize({c_});
  eps_ = eps;
  // cuDNN's running update is r = factor * batch + (1 - factor) * r with the unbiased variance,
  // and it saves 1 / sqrt(var + eps): the host layer's running statistics and inv_std.
  check(cudnnBatchNormalizationForwardTraining(handle().h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x_desc, x.data(),
                                               p.x_desc, y.data(), p.param_desc, gamma.data(), beta.data(),
                                               double(momentum), running_mean.data(), running_var.data(), double(eps),
                                               mean_.data(), inv_std_.data()),
        "cudnnBatchNormalizationForwardTraining");
}

void BatchNorm::forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                  const Tensor& running_mean, const Tensor& running_var, float eps) {
  const Plan& p = plan(x.shape());
  check(cudnnBatchNormalizationForwardInference(handle().h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x_desc, x.data(),
                                                p.x_desc, y.data(), p.param_desc, gamma.data(), beta.data(),
                                                running_mean.data(), running_var.data(), double(eps)),
        "cudnnBatchNormalizationForwardInference");
}

void BatchNorm::backward(const Tensor& dy, const Tensor& gamma, Tensor& dx, float* dgamma, float* dbeta) {
  const Plan& p = plan(input_.shape());
  check(cudnnBatchNormalizationBackward(handle().h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, p.x_desc,
                                        input_.data(), p.x_desc, dy.data(), p.x_desc, dx.data(), p.param_desc,
                                        gamma.data(), dgamma, dbeta, double(eps_), mean_.data(), inv_std_.data()),
        "cudnnBatchNormalizationBackward");
}

}  // namespace gradsync::trainer::cudnn

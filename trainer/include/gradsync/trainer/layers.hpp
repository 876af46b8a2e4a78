#pragma once
// The layers. Shapes: images NCHW, sequences [N, T, F], token ids [N, T] (stored as floats).
// Each layer keeps what its backward needs from the last training forward.
#include <cstdint>
#include <memory>

#include "gradsync/trainer/module.hpp"
#if defined(GRADSYNC_TRAINER_CUDNN)
#include "gradsync/trainer/cudnn.hpp"
#endif

namespace gradsync::trainer {

namespace onednn {
class Convolution;  // onednn.hpp: the host build's convolution engine
}

/// 2-D convolution: through oneDNN on the host (onednn.hpp), cuDNN on a GPU (cudnn.hpp), or im2col + GEMM, and
/// wherever the im2col lowering is pinned (the reference the tests compare oneDNN with).
class Conv2d final : public Module {
 public:
  Conv2d(std::string name, std::size_t in, std::size_t out, std::size_t kernel, std::size_t stride = 1,
         std::size_t pad = 0, bool bias = true);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  Param weight, bias;  ///< weight [out, in, k, k]; bias [out] (empty when disabled)

  /// How the convolution is computed. automatic: oneDNN on the host, cuDNN on a GPU (cudnn.hpp;
  /// batched im2col in a device build without cuDNN). The im2col lowerings, as GEMMs over column
  /// matrices: per_image: one image at a time, its column matrix still in cache for the product,
  /// straight into and out of NCHW (with stride 1 in padded-width form, see kernels.hpp); batched:
  /// many images side by side, so small maps still give wide products. All compute the same thing;
  /// tests pin each to compare them.
  enum class Lowering { automatic, per_image, batched };
  void set_lowering(Lowering l) { lowering_ = l; }

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  // A GPU wants few wide launches (one image at a time leaves it idle between small kernels), so
  // only a pinned lowering runs per image.
  bool per_image() const { return lowering_ == Lowering::per_image; }
#if !defined(GRADSYNC_TRAINER_CUDA)
  Tensor onednn_forward(const Tensor& x, std::size_t oh, std::size_t ow, Context& ctx);
  Tensor onednn_backward(const Tensor& dy, Context& ctx);
#endif
  // Padded-width geometry of one image (stride 1, per image; kernels.hpp): row width, plane
  // size, output positions incl. junk columns. Sizes the buffers.
  struct Shifted {
    std::size_t wp = 0, plane = 0, positions = 0;
  };
  Shifted shifted(std::size_t h, std::size_t w, std::size_t oh);
  void pad_image(const float* x, std::size_t h, std::size_t w, const Shifted& g);  // x -> padded_ -> col_
  // input_'s images b0 .. b0 + nb - 1 as columns of col_ for an oh x ow output (im2col); the
  // column gradient in col_ back to those images' planes of dx (col2im).
  void im2col(std::size_t b0, std::size_t nb, std::size_t oh, std::size_t ow);
  void col2im(std::size_t b0, std::size_t nb, std::size_t oh, std::size_t ow, Tensor& dx);
  // backward's im2col lowerings (do_forward's three): each writes the parameter gradients and calls
  // grads_ready before it computes the input gradient into dx.
  void backward_shifted(const Tensor& dy, Tensor& dx, Context& ctx);
  void backward_per_image(const Tensor& dy, Tensor& dx, Context& ctx);
  void backward_batched(const Tensor& dy, Tensor& dx, std::size_t nb_max, Context& ctx);

  std::size_t in_, out_, k_, stride_, pad_;
  bool has_bias_;
  Lowering lowering_ = Lowering::automatic;
  Tensor input_;            // saved input for backward
  Tensor col_;              // column matrix (one image, or one chunk of images)
  Tensor chunk_;            // GEMM output / gathered or widened dy as [out, images * positions]
  Tensor padded_;           // padded-width planes of one image (input, or input-gradient scratch)
  bool col_valid_ = false;  // col_ holds the last training forward's whole batch (batched)
#if defined(GRADSYNC_TRAINER_CUDNN)
  cudnn::Convolution cudnn_{in_, out_, k_, stride_, pad_};  // Lowering::automatic
#endif
  std::shared_ptr<onednn::Convolution> onednn_;  // host build, automatic lowering: made on first use
};

/// Batch normalization over N (and H, W) per channel; accepts [N, C] or [N, C, H, W].
class BatchNorm2d final : public Module {
 public:
  BatchNorm2d(std::string name, std::size_t channels, float momentum = 0.1f, float eps = 1e-5f);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  void collect_buffers(std::vector<Tensor*>& out) override;
  Param weight, bias;
  Tensor running_mean, running_var;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  std::size_t c_;
  float momentum_, eps_;
  Tensor xhat_, inv_std_, partial_;  // partial_: per-plane sums (kernels.hpp PlaneMoments, PlaneDotAndSum)
#if defined(GRADSYNC_TRAINER_CUDNN)
  cudnn::BatchNorm cudnn_{c_};  // the device build's whole layer
#endif
};

class ReLU final : public Module {
 public:
  explicit ReLU(std::string name = "relu") : Module(std::move(name)) {}
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  Tensor output_;
};

class MaxPool2d final : public Module {
 public:
  MaxPool2d(std::string name, std::size_t kernel, std::size_t stride, std::size_t pad = 0);
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  std::size_t k_, stride_, pad_;
  Shape in_shape_;
  Buffer<std::uint32_t> argmax_;  // flat input index of each output's maximum
};

/// [N, C, H, W] -> [N, C]: mean over H, W.
class GlobalAvgPool final : public Module {
 public:
  explicit GlobalAvgPool(std::string name = "avgpool") : Module(std::move(name)) {}
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  Shape in_shape_;
};

/// [N, ...] -> [N, prod(...)].
class Flatten final : public Module {
 public:
  explicit Flatten(std::string name = "flatten") : Module(std::move(name)) {}
  Tensor backward(const Tensor& dy, Context&) override { return dy.reshaped(in_shape_); }

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  Shape in_shape_;
};

/// Affine map on the last dimension: y = x W^T + b, W [out, in]; leading dimensions are batch.
class Linear final : public Module {
 public:
  Linear(std::string name, std::size_t in, std::size_t out, bool bias = true);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  Param weight, bias;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  std::size_t in_, out_;
  bool has_bias_;
  Tensor input_;
};

/// Inverted dropout; the mask is a hash of (seed, step, layer id, element) so runs are reproducible
/// and the same functor runs on any backend.
class Dropout final : public Module {
 public:
  Dropout(std::string name, float p, std::uint64_t layer_id);
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  float p_;
  std::uint64_t id_;
  std::uint64_t seed_ = 0, step_ = 0;  // of the last training forward (backward rebuilds the mask)
  bool active_ = false;
};

/// y = relu?(main(x) + shortcut(x)); an empty shortcut is the identity. The shortcut runs after the
/// main path, so parameter (forward) order is main then shortcut, as in torchvision.
class Residual final : public Module {
 public:
  Residual(std::string name, ModulePtr main, ModulePtr shortcut, bool relu_after = true);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  void collect_params(std::vector<Param*>& out) override;
  void collect_buffers(std::vector<Tensor*>& out) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  ModulePtr main_, shortcut_;
  bool relu_;
  Tensor output_;
};

/// Token ids [N, T] (floats holding integers) -> vectors [N, T, dim].
class Embedding final : public Module {
 public:
  Embedding(std::string name, std::size_t vocab, std::size_t dim);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  Param weight;  ///< [vocab, dim]

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  std::size_t vocab_, dim_;
  Buffer<std::uint32_t> ids_;
};

/// One LSTM layer over [N, T, in] -> hidden states [N, T, hidden], zero initial state, gates
/// ordered i, f, g, o (as PyTorch). Backward is full backpropagation through time.
class LSTM final : public Module {
 public:
  LSTM(std::string name, std::size_t in, std::size_t hidden);
  Tensor backward(const Tensor& dy, Context& ctx) override;
  Param w_ih, w_hh, bias;  ///< [4H, in], [4H, H], [4H]

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  void forward_steps(std::size_t t, std::size_t n, std::size_t lo, std::size_t rows, bool half);
  void backward_steps(const Tensor& dy, float* da, std::size_t t, std::size_t n, std::size_t lo, std::size_t rows,
                      bool half);

  std::size_t in_, h_;
  Tensor input_;
  Buffer<float> gates_;   // [T, N, 4H] activated gates
  Buffer<float> cells_;   // [T + 1, N, H] cell states (c_{-1} = 0 first)
  Buffer<float> hidden_;  // [T + 1, N, H] hidden states (h_{-1} = 0 first)
};

/// [N, T, F] -> [N, F]: the last time step (sequence classifiers).
class LastStep final : public Module {
 public:
  explicit LastStep(std::string name = "last") : Module(std::move(name)) {}
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  Shape in_shape_;
};

/// [N, C, H, W] -> [N, H, C*W]: image rows as time steps.
class RowsAsSequence final : public Module {
 public:
  explicit RowsAsSequence(std::string name = "rows") : Module(std::move(name)) {}
  Tensor backward(const Tensor& dy, Context& ctx) override;

 protected:
  Tensor do_forward(const Tensor& x, Context& ctx) override;

 private:
  Shape in_shape_;
};

/// Softmax + mean cross-entropy over rows of logits [M, C] (any leading dims flatten to M).
class SoftmaxCrossEntropy {
 public:
  /// Returns the mean loss; `labels` has M entries in [0, C).
  float forward(const Tensor& logits, std::span<const std::int32_t> labels);
  /// d(mean loss)/d(logits), from the last forward.
  Tensor backward() const;
  /// Correct arg-max predictions in the last forward.
  std::size_t correct() const { return correct_; }

 private:
  Tensor probs_;
  Buffer<std::int32_t> labels_;
  std::size_t correct_ = 0;
};

}  // namespace gradsync::trainer

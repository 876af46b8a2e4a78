#pragma once
/// Built-in profiles: layer sizes of published models and of the trainer's, with compute times
/// estimated from FLOPs at a stated rate (Estimate), and the P3 paper's toy models.
///
///   resnet50   torchvision ResNet-50 (v1.5) at 3x224x224, 1000 classes: 25,557,032 parameters
///   vgg19      torchvision VGG-19 at 3x224x224, 1000 classes: 143,667,240 parameters (its first
///              fully connected layer holds 71.5% of them, P3's Figure 5)
///   vgg11      gradsync-train's VGG-11 (trainer/src/models.cpp) at 1x28x28, 10 classes: 44,920,074
///   resnet20   gradsync-train's ResNet-20 at 1x28x28, 10 classes: 272,186
///   sockeye    Sockeye 1.5's RNN model as P3's artifact trains it (IWSLT15 en-vi, run_exp.sh:
///              --num-layers 2:2 --rnn-cell-type lstm --rnn-num-hidden 512 --num-embed 512:512
///              --attention-type mlp --attention-num-hidden 512; vocabularies 17,192 and 7,710 with
///              Sockeye's 4 special words): 27,734,558 parameters, the heaviest the source
///              embedding, the first layer (P3's Figure 5(c)). Sentences padded to 25 words on both
///              sides (IWSLT15 averages 17-19 words per sentence; --bucket-width 10 pads to the
///              next multiple of 10): an assumption, the paper gives no lengths
///   p3-fig4    P3's Figure 4 toy: 3 layers, forward and backward 1 s each; 62,500,000 parameters
///              per layer, so that a ring over 2 ranks at 1 Gbit/s synchronizes one in 2 s
///   p3-fig6    P3's Figure 6 toy: the same with the middle layer 3x larger (31.25M, 93.75M,
///              31.25M parameters): through one dedicated server at 1 Gbit/s, with an update rate
///              of 0.125 GB/s, push, update and broadcast take 1 s each (3 s for the middle one)
///
/// Times: a convolution takes 2 Cin k^2 Cout Hout Wout FLOPs per sample forward, a linear layer
/// 2 in out, a batch norm 4 C H W, a recurrent or attention layer its matrix products per word,
/// an embedding none (a lookup); backward is `backward_factor` times forward. ReLU, pooling and
/// dropout are not timed (they hold no parameters and cost little next to those). Measured
/// profiles (gradsync-train --profile, JSON) replace these estimates.
///
/// Tensors are listed in forward order with torchvision's names (weight before bias, a block's
/// main path before its downsample), so they match the trainer's ModelLayout.
///
/// \code
///   auto p = gradsync::sim::builtin_profile("vgg19", {.batch = 32, .flops_per_second = 10e12});
/// \endcode
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <gradsync/core/error.hpp>
#include "profile.hpp"

namespace gradsync::sim {

/// How built-in profiles turn FLOPs into seconds, and the input they see.
struct Estimate {
  std::size_t batch = 32;            ///< samples per rank per iteration
  double flops_per_second = 100e9;   ///< sustained rate of one rank (one AVX-512 core with Eigen: ~140e9 peak)
  double backward_factor = 2.0;      ///< backward FLOPs / forward FLOPs (input and weight gradients)
  std::array<std::size_t, 3> input{};  ///< C, H, W; zeros: the model's own (see the list above)
  std::size_t classes = 0;           ///< 0: the model's own
};

namespace detail {

/// Appends compute layers while tracking the feature map's shape.
class ProfileBuilder {
 public:
  ProfileBuilder(std::string name, const Estimate& e, std::array<std::size_t, 3> input) : e_(e) {
    p_.name = std::move(name);
    c_ = input[0];
    h_ = input[1];
    w_ = input[2];
  }

  void conv(const std::string& name, std::size_t out, std::size_t k, std::size_t stride, std::size_t pad, bool bias) {
    if (h_ + 2 * pad < k || w_ + 2 * pad < k)
      throw ConfigError("gradsync: built-in profile " + p_.name + ": input too small at " + name + " (" +
                        std::to_string(h_) + "x" + std::to_string(w_) + " before a " + std::to_string(k) + "x" +
                        std::to_string(k) + " convolution); use a larger input");
    const std::size_t ho = (h_ + 2 * pad - k) / stride + 1, wo = (w_ + 2 * pad - k) / stride + 1;
    std::vector<LayerSpec> tensors{{name + ".weight", c_ * k * k * out}};
    if (bias) tensors.push_back({name + ".bias", out});
    layer(name, 2.0 * double(c_ * k * k * out * ho * wo), std::move(tensors));
    c_ = out;
    h_ = ho;
    w_ = wo;
  }
  /// A ResNet shortcut: 1x1 convolution of `stride` and batch norm from the block's input
  /// (in x h x w) to the current shape, which it leaves as it is.
  void downsample(const std::string& name, std::size_t in, std::size_t h, std::size_t w, std::size_t stride) {
    const std::array<std::size_t, 3> main{c_, h_, w_};
    c_ = in;
    h_ = h;
    w_ = w;
    conv(name + ".0", main[0], 1, stride, 0, false);
    batch_norm(name + ".1");
    c_ = main[0];
    h_ = main[1];
    w_ = main[2];
  }
  void batch_norm(const std::string& name) {
    layer(name, 4.0 * double(c_ * h_ * w_), {{name + ".weight", c_}, {name + ".bias", c_}});
  }
  void pool(std::size_t k, std::size_t stride, std::size_t pad) {
    h_ = (h_ + 2 * pad - k) / stride + 1;
    w_ = (w_ + 2 * pad - k) / stride + 1;
  }
  void global_pool() { h_ = w_ = 1; }
  void linear(const std::string& name, std::size_t out) {
    const std::size_t in = c_ * h_ * w_;
    layer(name, 2.0 * double(in * out), {{name + ".weight", in * out}, {name + ".bias", out}});
    c_ = out;
    h_ = w_ = 1;
  }
  /// A layer of `flops` per sample holding `tensors`.
  void layer(const std::string& name, double flops, std::vector<LayerSpec> tensors) {
    const double forward = flops * double(e_.batch) / e_.flops_per_second;
    p_.layers.push_back({name, forward, forward * e_.backward_factor, std::move(tensors)});
  }
  /// A layer with given times and one tensor (the toys).
  void timed(const std::string& name, double forward, double backward, std::size_t elements) {
    p_.layers.push_back({name, forward, backward, {{name + ".weight", elements}}});
  }

  std::size_t channels() const { return c_; }
  std::size_t height() const { return h_; }
  std::size_t width() const { return w_; }
  Profile take() { return std::move(p_); }

 private:
  Profile p_;
  Estimate e_;
  std::size_t c_ = 0, h_ = 0, w_ = 0;
};

/// torchvision's ResNet blocks: `bottleneck` (1x1, 3x3 with the stride, 1x1 to 4x planes) or the
/// basic block (two 3x3); a 1x1 downsample with batch norm when the shape changes.
inline void resnet_stages(ProfileBuilder& b, bool bottleneck, const std::vector<std::size_t>& blocks,
                          const std::vector<std::size_t>& planes) {
  for (std::size_t s = 0; s < blocks.size(); ++s)
    for (std::size_t i = 0; i < blocks[s]; ++i) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(i);
      const std::size_t in = b.channels(), stride = i == 0 && s > 0 ? 2 : 1;
      const std::size_t out = bottleneck ? planes[s] * 4 : planes[s];
      const std::size_t h = b.height(), w = b.width();
      if (bottleneck) {
        b.conv(name + ".conv1", planes[s], 1, 1, 0, false);
        b.batch_norm(name + ".bn1");
        b.conv(name + ".conv2", planes[s], 3, stride, 1, false);
        b.batch_norm(name + ".bn2");
        b.conv(name + ".conv3", out, 1, 1, 0, false);
        b.batch_norm(name + ".bn3");
      } else {
        b.conv(name + ".conv1", planes[s], 3, stride, 1, false);
        b.batch_norm(name + ".bn1");
        b.conv(name + ".conv2", planes[s], 3, 1, 1, false);
        b.batch_norm(name + ".bn2");
      }
      if (stride != 1 || in != out) b.downsample(name + ".downsample", in, h, w, stride);
    }
}

/// torchvision's VGG without batch norm, with the trainer's rule for small inputs: a pooling
/// stage is skipped once the map is smaller than 4x4 (at 224x224 all five run). 0 = pool.
inline void vgg(ProfileBuilder& b, const std::vector<std::size_t>& config, std::size_t classes) {
  std::size_t index = 0;
  for (std::size_t v : config) {
    if (v == 0) {
      if (b.height() >= 4 && b.width() >= 4) b.pool(2, 2, 0);
      ++index;
      continue;
    }
    b.conv("features." + std::to_string(index), v, 3, 1, 1, true);
    index += 2;  // the convolution and its ReLU
  }
  b.linear("classifier.0", 4096);
  b.linear("classifier.3", 4096);
  b.linear("classifier.6", classes);
}

/// Sockeye's RNN encoder-decoder (see the list above), as compute layers in forward order. The
/// decoder runs word by word through both LSTM layers, the attention and the hidden layer, so all
/// their gradients (and the target embedding's) are ready together, at the end of its backward;
/// the output layer runs once over all the decoder's states.
inline void sockeye(ProfileBuilder& b) {
  constexpr std::size_t source_vocab = 17'192, target_vocab = 7'710, embed = 512, hidden = 512, words = 25;
  constexpr double w = words;
  // An LSTM's tensors in MXNet's order: i2h weight and bias, h2h weight and bias (4 gates).
  auto lstm = [](const std::string& name, std::size_t in, std::size_t units) -> std::vector<LayerSpec> {
    return {{name + "_i2h_weight", 4 * units * in}, {name + "_i2h_bias", 4 * units},
            {name + "_h2h_weight", 4 * units * units}, {name + "_h2h_bias", 4 * units}};
  };
  auto lstm_flops = [](std::size_t in, std::size_t units) { return 2.0 * double(4 * units * (in + units)); };
  auto join = [](std::vector<LayerSpec> a, const std::vector<LayerSpec>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  b.layer("source_embed", 0, {{"source_embed_weight", source_vocab * embed}});
  // Layer 1: bidirectional, half the units each way.
  b.layer("encoder_birnn", 2 * w * lstm_flops(embed, hidden / 2),
          join(lstm("encoder_birnn_forward_l0", embed, hidden / 2), lstm("encoder_birnn_reverse_l0", embed, hidden / 2)));
  b.layer("encoder_rnn", w * lstm_flops(hidden, hidden), lstm("encoder_rnn_l0", hidden, hidden));
  // The attention's projection of every source state, and the decoder's initial h and c per layer.
  std::vector<LayerSpec> init{{"att_e2h_weight", hidden * hidden}};
  for (int i = 0; i < 4; ++i) {
    const std::string n = "enc2decinit_" + std::to_string(i);
    init.insert(init.end(), {{n + "_weight", hidden * hidden}, {n + "_bias", hidden}});
  }
  b.layer("decoder_init", 2.0 * double(hidden * hidden) * (w + 4), std::move(init));
  // Per target word: layer 0 reads the embedding and the previous attentional state.
  std::vector<LayerSpec> decoder = join(join({{"target_embed_weight", target_vocab * embed}},
                                             lstm("decoder_rnn_l0", embed + hidden, hidden)),
                                        lstm("decoder_rnn_l1", hidden, hidden));
  decoder.insert(decoder.end(), {{"att_q2h_weight", hidden * hidden}, {"att_h2s_weight", hidden},
                                 {"decoder_rnn_hidden_weight", hidden * 2 * hidden}, {"decoder_rnn_hidden_bias", hidden}});
  const double attention = 2.0 * double(hidden * hidden) + 4.0 * double(hidden) * w;  // query, scores, context
  b.layer("decoder", w * (lstm_flops(embed + hidden, hidden) + lstm_flops(hidden, hidden) + attention +
                          2.0 * double(2 * hidden * hidden)),
          std::move(decoder));
  b.layer("decoder_rnn_cls", w * 2.0 * double(hidden * target_vocab),
          {{"decoder_rnn_cls_weight", target_vocab * hidden}, {"decoder_rnn_cls_bias", target_vocab}});
}

}  // namespace detail

/// The names builtin_profile() knows.
inline constexpr std::string_view builtin_profiles = "resnet50, vgg19, vgg11, resnet20, sockeye, p3-fig4, p3-fig6";

/// A built-in profile by name (see the list above); throws ConfigError naming the valid ones.
inline Profile builtin_profile(std::string_view name, const Estimate& e) {
  if (e.batch == 0 || !(e.flops_per_second > 0) || !(e.backward_factor >= 0))
    throw ConfigError("gradsync: the FLOP estimate needs a batch >= 1, a rate > 0 and a backward factor >= 0");
  auto shape = [&](std::array<std::size_t, 3> own) {
    if (e.input == std::array<std::size_t, 3>{}) return own;
    if (e.input[0] == 0 || e.input[1] == 0 || e.input[2] == 0)
      throw ConfigError("gradsync: the input shape needs three positive sizes C, H, W");
    return e.input;
  };
  auto classes = [&](std::size_t own) { return e.classes ? e.classes : own; };
  if (name == "p3-fig4" || name == "p3-fig6") {
    detail::ProfileBuilder b(std::string(name), e, {});
    const bool fig6 = name == "p3-fig6";
    b.timed("layer1", 1, 1, fig6 ? 31'250'000 : 62'500'000);
    b.timed("layer2", 1, 1, fig6 ? 93'750'000 : 62'500'000);
    b.timed("layer3", 1, 1, fig6 ? 31'250'000 : 62'500'000);
    return b.take();
  }
  if (name == "sockeye") {
    if (e.input != std::array<std::size_t, 3>{} || e.classes != 0)
      throw ConfigError("gradsync: the built-in sockeye profile has fixed vocabularies and sentence lengths; "
                        "drop --input and --classes (or give a measured profile: --profile FILE)");
    detail::ProfileBuilder b("sockeye", e, {});
    detail::sockeye(b);
    return b.take();
  }
  if (name == "resnet50" || name == "resnet20") {
    const bool imagenet = name == "resnet50";
    detail::ProfileBuilder b(std::string(name), e, shape(imagenet ? std::array<std::size_t, 3>{3, 224, 224}
                                                                  : std::array<std::size_t, 3>{1, 28, 28}));
    if (imagenet) {
      b.conv("conv1", 64, 7, 2, 3, false);
      b.batch_norm("bn1");
      b.pool(3, 2, 1);
      detail::resnet_stages(b, true, {3, 4, 6, 3}, {64, 128, 256, 512});
    } else {
      b.conv("conv1", 16, 3, 1, 1, false);
      b.batch_norm("bn1");
      detail::resnet_stages(b, false, {3, 3, 3}, {16, 32, 64});
    }
    b.global_pool();
    b.linear("fc", classes(imagenet ? 1000 : 10));
    return b.take();
  }
  if (name == "vgg19" || name == "vgg11") {
    const bool imagenet = name == "vgg19";
    detail::ProfileBuilder b(std::string(name), e, shape(imagenet ? std::array<std::size_t, 3>{3, 224, 224}
                                                                  : std::array<std::size_t, 3>{1, 28, 28}));
    if (imagenet)
      detail::vgg(b, {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0},
                  classes(1000));
    else
      detail::vgg(b, {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}, classes(10));
    return b.take();
  }
  throw ConfigError("gradsync: unknown built-in profile '" + std::string(name) + "'; valid: " +
                    std::string(builtin_profiles) + " (or give a measured one as JSON: --profile FILE)");
}

}  // namespace gradsync::sim

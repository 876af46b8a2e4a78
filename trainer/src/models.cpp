// The architectures. Image models track the feature-map shape while building so that the
// classifier fits any input size; layer names follow torchvision so parameter lists compare.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <gradsync/core/error.hpp>

#include "gradsync/trainer/model.hpp"

namespace gradsync::trainer {

namespace {

struct Builder {
  double width;
  std::size_t c, h, w;  // current feature-map shape
  std::uint64_t dropout_ids = 0;

  std::size_t scaled(std::size_t base) const { return std::max<std::size_t>(1, std::lround(double(base) * width)); }

  static std::size_t out_size(std::size_t in, std::size_t k, std::size_t s, std::size_t p) {
    return (in + 2 * p - k) / s + 1;
  }
  void conv(Sequential& seq, const std::string& name, std::size_t out, std::size_t k, std::size_t s, std::size_t p,
            bool bias) {
    if (h + 2 * p < k || w + 2 * p < k)
      throw ConfigError(name + ": the input is too small for this model (feature map " + std::to_string(h) +
                                  "x" + std::to_string(w) + " before a " + std::to_string(k) + "x" +
                                  std::to_string(k) + " convolution)");
    seq.emplace<Conv2d>(name, c, out, k, s, p, bias);
    c = out;
    h = out_size(h, k, s, p);
    w = out_size(w, k, s, p);
  }
  void maxpool(Sequential& seq, const std::string& name, std::size_t k, std::size_t s, std::size_t p) {
    if (h + 2 * p < k || w + 2 * p < k)
      throw ConfigError(name + ": the input is too small for this model (feature map " + std::to_string(h) +
                                  "x" + std::to_string(w) + " before a " + std::to_string(k) + "x" +
                                  std::to_string(k) + " pooling window)");
    seq.emplace<MaxPool2d>(name, k, s, p);
    h = out_size(h, k, s, p);
    w = out_size(w, k, s, p);
  }
  std::unique_ptr<Dropout> dropout(const std::string& name, float p) {
    return std::make_unique<Dropout>(name, p, dropout_ids++);
  }
};

Builder image_builder(const ModelConfig& cfg) {
  if (cfg.input.size() != 3 || product(cfg.input) == 0)
    throw ConfigError("model " + cfg.name + ": input must be [C, H, W] with positive sizes, got " +
                                to_string(cfg.input));
  return Builder{cfg.width, cfg.input[0], cfg.input[1], cfg.input[2]};
}

// ---- ResNets ----
/// A block: `main` plus the shortcut, which is the identity unless the block changes the shape
/// (then a 1x1 convolution of `stride` and batch norm: `name`.downsample).
ModulePtr residual(const std::string& name, ModulePtr main, std::size_t in, std::size_t out, std::size_t stride) {
  ModulePtr shortcut;
  if (stride != 1 || in != out) {
    auto sc = std::make_unique<Sequential>(name + ".downsample");
    sc->emplace<Conv2d>(name + ".downsample.0", in, out, 1, stride, 0, false);
    sc->emplace<BatchNorm2d>(name + ".downsample.1", out);
    shortcut = std::move(sc);
  }
  return std::make_unique<Residual>(name, std::move(main), std::move(shortcut));
}

ModulePtr basic_block(Builder& b, const std::string& name, std::size_t planes, std::size_t stride) {
  const std::size_t in = b.c;
  auto main = std::make_unique<Sequential>(name);
  b.conv(*main, name + ".conv1", planes, 3, stride, 1, false);
  main->emplace<BatchNorm2d>(name + ".bn1", planes);
  main->emplace<ReLU>();
  b.conv(*main, name + ".conv2", planes, 3, 1, 1, false);
  main->emplace<BatchNorm2d>(name + ".bn2", planes);
  return residual(name, std::move(main), in, planes, stride);
}

ModulePtr bottleneck(Builder& b, const std::string& name, std::size_t planes, std::size_t stride) {
  const std::size_t in = b.c, out = planes * 4;
  auto main = std::make_unique<Sequential>(name);
  b.conv(*main, name + ".conv1", planes, 1, 1, 0, false);
  main->emplace<BatchNorm2d>(name + ".bn1", planes);
  main->emplace<ReLU>();
  b.conv(*main, name + ".conv2", planes, 3, stride, 1, false);  // stride on the 3x3 (ResNet v1.5)
  main->emplace<BatchNorm2d>(name + ".bn2", planes);
  main->emplace<ReLU>();
  b.conv(*main, name + ".conv3", out, 1, 1, 0, false);
  main->emplace<BatchNorm2d>(name + ".bn3", out);
  return residual(name, std::move(main), in, out, stride);
}

using BlockFn = ModulePtr (*)(Builder&, const std::string&, std::size_t, std::size_t);

void resnet_stages(Builder& b, Sequential& net, BlockFn block, const std::vector<std::size_t>& blocks,
                   const std::vector<std::size_t>& planes) {
  for (std::size_t s = 0; s < blocks.size(); ++s)
    for (std::size_t i = 0; i < blocks[s]; ++i)
      net.add(block(b, "layer" + std::to_string(s + 1) + "." + std::to_string(i), b.scaled(planes[s]),
                    i == 0 && s > 0 ? 2 : 1));
}

ModulePtr resnet20(const ModelConfig& cfg) {
  Builder b = image_builder(cfg);
  auto net = std::make_unique<Sequential>();
  b.conv(*net, "conv1", b.scaled(16), 3, 1, 1, false);
  net->emplace<BatchNorm2d>("bn1", b.c);
  net->emplace<ReLU>();
  resnet_stages(b, *net, basic_block, {3, 3, 3}, {16, 32, 64});
  net->emplace<GlobalAvgPool>();
  net->emplace<Linear>("fc", b.c, cfg.classes);
  return net;
}

ModulePtr resnet_imagenet(const ModelConfig& cfg, BlockFn block, const std::vector<std::size_t>& blocks) {
  Builder b = image_builder(cfg);
  auto net = std::make_unique<Sequential>();
  b.conv(*net, "conv1", b.scaled(64), 7, 2, 3, false);
  net->emplace<BatchNorm2d>("bn1", b.c);
  net->emplace<ReLU>();
  b.maxpool(*net, "maxpool", 3, 2, 1);
  resnet_stages(b, *net, block, blocks, {64, 128, 256, 512});
  net->emplace<GlobalAvgPool>();
  net->emplace<Linear>("fc", b.c, cfg.classes);
  return net;
}

// ---- VGG (torchvision configurations, no batch norm) ----
// A pooling stage is skipped once the map is smaller than 4x4, so small inputs (28x28 ends at 3x3)
// keep a spatial extent; at 224x224 all five pools run and the classifier sees 7x7 as in torchvision.
ModulePtr vgg(const ModelConfig& cfg, const std::vector<int>& layers) {
  Builder b = image_builder(cfg);
  auto net = std::make_unique<Sequential>();
  std::size_t idx = 0;
  for (int l : layers) {
    if (l == 0) {
      if (b.h >= 4 && b.w >= 4) b.maxpool(*net, "features." + std::to_string(idx), 2, 2, 0);
      ++idx;
      continue;
    }
    b.conv(*net, "features." + std::to_string(idx), b.scaled(std::size_t(l)), 3, 1, 1, true);
    net->emplace<ReLU>();
    idx += 2;
  }
  const std::size_t hidden = b.scaled(4096);
  net->emplace<Flatten>();
  net->emplace<Linear>("classifier.0", b.c * b.h * b.w, hidden);
  net->emplace<ReLU>();
  net->add(b.dropout("classifier.2", 0.5f));
  net->emplace<Linear>("classifier.3", hidden, hidden);
  net->emplace<ReLU>();
  net->add(b.dropout("classifier.5", 0.5f));
  net->emplace<Linear>("classifier.6", hidden, cfg.classes);
  return net;
}

// ---- AlexNet-BN: batch norm after every convolution and after pool5 (ImageNet in 4 minutes) ----
// Inputs under 64 pixels get a 5x5 stride-1 first convolution instead of 11x11 stride 4, and a
// pool is skipped when the map is smaller than its 3x3 window.
ModulePtr alexnet_bn(const ModelConfig& cfg) {
  Builder b = image_builder(cfg);
  auto net = std::make_unique<Sequential>();
  const bool small = b.h < 64 || b.w < 64;
  auto conv_bn = [&](const std::string& n, std::size_t out, std::size_t k, std::size_t s, std::size_t p) {
    b.conv(*net, "features." + n, b.scaled(out), k, s, p, false);
    net->emplace<BatchNorm2d>("features." + n + ".bn", b.c);
    net->emplace<ReLU>();
  };
  if (small) conv_bn("0", 64, 5, 1, 2);
  else conv_bn("0", 64, 11, 4, 2);
  auto pool = [&](const std::string& n) {
    if (b.h >= 3 && b.w >= 3) b.maxpool(*net, "features." + n, 3, 2, 0);
  };
  pool("2");
  conv_bn("3", 192, 5, 1, 2);
  pool("5");
  conv_bn("6", 384, 3, 1, 1);
  conv_bn("8", 256, 3, 1, 1);
  conv_bn("10", 256, 3, 1, 1);
  pool("12");
  net->emplace<BatchNorm2d>("pool5.bn", b.c);
  const std::size_t hidden = b.scaled(4096);
  net->emplace<Flatten>();
  net->add(b.dropout("classifier.0", 0.5f));
  net->emplace<Linear>("classifier.1", b.c * b.h * b.w, hidden);
  net->emplace<ReLU>();
  net->add(b.dropout("classifier.3", 0.5f));
  net->emplace<Linear>("classifier.4", hidden, hidden);
  net->emplace<ReLU>();
  net->emplace<Linear>("classifier.6", hidden, cfg.classes);
  return net;
}

// ---- LSTMs ----
ModulePtr lstm_classifier(const ModelConfig& cfg) {
  Builder b = image_builder(cfg);
  const std::size_t hidden = b.scaled(128);
  auto net = std::make_unique<Sequential>();
  net->emplace<RowsAsSequence>();
  net->emplace<LSTM>("lstm", b.c * b.w, hidden);
  net->emplace<LastStep>();
  net->emplace<Linear>("fc", hidden, cfg.classes);
  return net;
}

// Embedding-heavy like the P3 paper's Sockeye: the first layer (the embedding) is the largest.
ModulePtr lstm_lm(const ModelConfig& cfg) {
  if (cfg.input.size() != 1 || cfg.input[0] == 0)
    throw ConfigError("model lstm-lm: input must be [T] token ids, got " + to_string(cfg.input));
  Builder b{cfg.width, 0, 0, 0};
  const std::size_t embed = b.scaled(512), hidden = b.scaled(256);
  auto net = std::make_unique<Sequential>();
  net->emplace<Embedding>("embedding", cfg.classes, embed);
  net->emplace<LSTM>("lstm", embed, hidden);
  net->emplace<Linear>("decoder", hidden, cfg.classes);
  return net;
}

const std::map<std::string, std::function<ModulePtr(const ModelConfig&)>>& registry() {
  static const std::map<std::string, std::function<ModulePtr(const ModelConfig&)>> r = {
      {"resnet20", resnet20},
      {"resnet18", [](const ModelConfig& c) { return resnet_imagenet(c, basic_block, {2, 2, 2, 2}); }},
      {"resnet50", [](const ModelConfig& c) { return resnet_imagenet(c, bottleneck, {3, 4, 6, 3}); }},
      {"vgg11", [](const ModelConfig& c) { return vgg(c, {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}); }},
      {"vgg16", [](const ModelConfig& c) {
         return vgg(c, {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0});
       }},
      {"vgg19", [](const ModelConfig& c) {
         return vgg(c, {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0});
       }},
      {"alexnet-bn", alexnet_bn},
      {"lstm", lstm_classifier},
      {"lstm-lm", lstm_lm},
  };
  return r;
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (auto& [k, v] : registry()) n.push_back(k);
    return n;
  }();
  return names;
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  auto it = registry().find(config.name);
  if (it == registry().end()) {
    std::string valid;
    for (auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw ConfigError("unknown model '" + config.name + "' (valid: " + valid + ")");
  }
  if (!(config.width > 0.0)) throw ConfigError("model width must be positive");
  if (config.classes < 2) throw ConfigError("model needs at least 2 classes");
  return std::make_unique<Model>(config, it->second(config));
}

}  // namespace gradsync::trainer

#pragma once
/// ModelLayout: a model's parameter tensors ("layers") in forward order, with a signature that
/// lets ranks check they all train the same model.
///
/// \code
///   gradsync::ModelLayout layout{{"conv1.weight", 1728}, {"conv1.bias", 64}, {"fc.weight", 40960}};
///   layout.num_layers();      // 3, index 0 is the first layer of the forward pass
///   layout.signature();       // same on every rank that has the same names and sizes
/// \endcode
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "error.hpp"

namespace gradsync {

struct LayerSpec {
  std::string name;
  std::size_t elements = 0;
};

class ModelLayout {
 public:
  ModelLayout(std::initializer_list<LayerSpec> layers) : ModelLayout(std::vector<LayerSpec>(layers)) {}
  explicit ModelLayout(std::vector<LayerSpec> layers) : layers_(std::move(layers)) {
    if (layers_.empty()) throw UsageError("gradsync: ModelLayout needs at least one layer");
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].elements == 0)
        throw UsageError("gradsync: layer " + std::to_string(i) + " ('" + layers_[i].name +
                         "') has 0 elements; leave layers without gradients out of the layout");
      if (layers_[i].elements > UINT32_MAX)
        throw UsageError("gradsync: layer '" + layers_[i].name + "' has more than 2^32-1 elements; split it");
      total_ += layers_[i].elements;
    }
  }

  std::size_t num_layers() const { return layers_.size(); }
  const LayerSpec& layer(std::size_t i) const { return layers_.at(i); }
  const std::vector<LayerSpec>& layers() const { return layers_; }
  std::size_t total_elements() const { return total_; }

  /// FNV-1a over every name and size, in order: equal layouts give equal signatures.
  std::uint64_t signature() const {
    std::uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](const void* p, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 0x100000001b3ull;
    };
    for (const auto& l : layers_) {
      mix(l.name.data(), l.name.size());
      const std::uint64_t n = l.elements;
      mix(&n, sizeof n);
    }
    return h;
  }

 private:
  std::vector<LayerSpec> layers_;
  std::size_t total_ = 0;
};

}  // namespace gradsync

#pragma once
// Datasets held in memory, and a loader that shards them over ranks and shuffles per epoch.
#include <cstdint>
#include <string>
#include <vector>

#include "gradsync/trainer/tensor.hpp"

namespace gradsync::trainer {

struct Dataset {
  Shape sample;                        ///< one input: [C, H, W], or [T] token ids
  std::size_t labels_per_sample = 1;   ///< 1 for classification, T for next-token prediction
  std::size_t classes = 0;
  std::vector<float> inputs;           ///< size() * product(sample)
  std::vector<std::int32_t> labels;    ///< size() * labels_per_sample
  std::size_t size() const { return labels_per_sample ? labels.size() / labels_per_sample : 0; }
};

inline constexpr const char* fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
inline constexpr float fashion_mnist_mean = 0.2860f, fashion_mnist_std = 0.3530f;

/// Reads a gzipped (or plain) IDX image/label file pair, validating magic numbers (0x803, 0x801),
/// dimensions, sizes and label range; pixels become (x/255 - mean) / std. Any problem throws
/// std::runtime_error naming the file and the Debian package to install.
Dataset read_idx(const std::string& images_path, const std::string& labels_path, float mean = fashion_mnist_mean,
                 float std = fashion_mnist_std);
/// Fashion-MNIST from `dir`: train-* (60,000) or t10k-* (10,000) images and labels.
Dataset load_fashion_mnist(bool train, const std::string& dir = fashion_mnist_dir);

/// Images of any shape: class-dependent fixed patterns plus noise (learnable, for throughput runs).
Dataset synthetic_images(const Shape& sample, std::size_t classes, std::size_t count, std::uint64_t seed);
/// Token sequences for a language model: each next token is a fixed function of the current one
/// (with some noise), so the loss can fall.
Dataset synthetic_tokens(std::size_t length, std::size_t vocab, std::size_t count, std::uint64_t seed);

/// Moves the last `count` samples of `data` into a new dataset (a held-out split).
Dataset split_tail(Dataset& data, std::size_t count);

/// The order of an epoch's samples: a permutation of [0, size) that is a function of seed and epoch
/// (Fisher-Yates on mt19937_64 with the loader's own draws, the same on every standard library).
std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed, std::size_t epoch);

/// Rank `rank` of `ranks` sees every ranks-th sample of the epoch's permutation (the permutation is
/// a function of seed and epoch: the same on every rank, different every epoch). Batches are full;
/// the last partial one is dropped. batch(epoch, i) is a pure function: resuming needs no state.
class ShardedLoader {
 public:
  ShardedLoader(const Dataset& data, std::size_t batch, std::size_t rank, std::size_t ranks, std::uint64_t seed,
                bool shuffle = true);
  std::size_t batches_per_epoch() const { return batches_; }
  void batch(std::size_t epoch, std::size_t index, Tensor& x, std::vector<std::int32_t>& y);

 private:
  const Dataset& data_;
  std::size_t batch_, rank_, ranks_, batches_;
  std::uint64_t seed_;
  bool shuffle_;
  std::size_t perm_epoch_ = SIZE_MAX;
  std::vector<std::uint32_t> perm_;
};

/// Copies the samples at `indices` into x [count, sample...] and their labels into y.
void gather_samples(const Dataset& data, const std::uint32_t* indices, std::size_t count, Tensor& x,
                    std::vector<std::int32_t>& y);

}  // namespace gradsync::trainer

#include "gradsync/trainer/data.hpp"
#include "gradsync/trainer/formats.hpp"
#include <gradsync/core/error.hpp>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

namespace gradsync::trainer {

namespace {

// gzread also reads uncompressed files, so plain IDX works too.
std::vector<unsigned char> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) data_error(path, "cannot open file");
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  const std::string what = err != Z_OK && err != Z_STREAM_END ? msg : "";
  gzclose(f);
  if (n < 0 || !what.empty()) data_error(path, "corrupt gzip stream (" + what + ")");
  return out;
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path, float mean, float std) {
  const auto img = read_gz(images_path);
  const auto lab = read_gz(labels_path);
  const IdxPair idx = parse_idx(img, lab, images_path, labels_path);
  Dataset d;
  d.sample = {1, idx.rows, idx.cols};
  d.classes = 10;
  d.inputs.resize(idx.pixels.size());
  const float scale = 1.0f / (255.0f * std), shift = mean / std;
  for (std::size_t i = 0; i < d.inputs.size(); ++i) d.inputs[i] = float(idx.pixels[i]) * scale - shift;
  d.labels.assign(idx.labels.begin(), idx.labels.end());
  return d;
}

Dataset load_fashion_mnist(bool train, const std::string& dir) {
  const std::string prefix = dir + (train ? "/train-" : "/t10k-");
  Dataset d = read_idx(prefix + "images-idx3-ubyte.gz", prefix + "labels-idx1-ubyte.gz");
  const std::size_t expected = train ? 60000 : 10000;
  if (d.size() != expected || d.sample != Shape{1, 28, 28})
    data_error(prefix + "images-idx3-ubyte.gz", "holds " + std::to_string(d.size()) + " images of " +
                                                    to_string(d.sample) + ", not Fashion-MNIST's " +
                                                    std::to_string(expected) + " of [1, 28, 28]");
  return d;
}

Dataset synthetic_images(const Shape& sample, std::size_t classes, std::size_t count, std::uint64_t seed) {
  if (sample.size() != 3 || product(sample) == 0 || classes < 2 || count == 0)
    throw UsageError("synthetic images: need a [C, H, W] shape, >= 2 classes and >= 1 sample");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t s = product(sample);
  std::vector<float> patterns(classes * s);
  for (auto& v : patterns) v = normal(rng);
  Dataset d;
  d.sample = sample;
  d.classes = classes;
  d.inputs.resize(count * s);
  d.labels.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto y = std::int32_t(rng() % classes);
    d.labels[i] = y;
    for (std::size_t j = 0; j < s; ++j) d.inputs[i * s + j] = 0.5f * patterns[y * s + j] + normal(rng);
  }
  return d;
}

Dataset synthetic_tokens(std::size_t length, std::size_t vocab, std::size_t count, std::uint64_t seed) {
  if (length == 0 || vocab < 2 || count == 0)
    throw UsageError("synthetic tokens: need length >= 1, vocabulary >= 2 and >= 1 sequence");
  std::mt19937_64 rng(seed);
  Dataset d;
  d.sample = {length};
  d.labels_per_sample = length;
  d.classes = vocab;
  d.inputs.resize(count * length);
  d.labels.resize(count * length);
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t tok = rng() % vocab;
    for (std::size_t t = 0; t < length; ++t) {
      d.inputs[i * length + t] = float(tok);
      tok = rng() % 8 == 0 ? rng() % vocab : (tok * 31 + 7) % vocab;  // mostly a fixed successor
      d.labels[i * length + t] = std::int32_t(tok);
    }
  }
  return d;
}

Dataset split_tail(Dataset& data, std::size_t count) {
  if (count > data.size()) throw UsageError("split: asked for more samples than the dataset holds");
  const std::size_t keep = data.size() - count, s = product(data.sample), l = data.labels_per_sample;
  Dataset tail{data.sample, l, data.classes, {data.inputs.begin() + long(keep * s), data.inputs.end()},
               {data.labels.begin() + long(keep * l), data.labels.end()}};
  data.inputs.resize(keep * s);
  data.labels.resize(keep * l);
  return tail;
}

void gather_samples(const Dataset& data, const std::uint32_t* indices, std::size_t count, Tensor& x,
                    std::vector<std::int32_t>& y) {
  Shape shape{count};
  shape.insert(shape.end(), data.sample.begin(), data.sample.end());
  x.resize(shape);
  const std::size_t s = product(data.sample), l = data.labels_per_sample;
  y.resize(count * l);
#if defined(GRADSYNC_TRAINER_CUDA)  // gathered in pinned memory, sent in one copy that does not wait
  auto* gathered = static_cast<float*>(cuda::staging(x.size() * sizeof(float)));
#else
  float* gathered = x.data();
#endif
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(gathered + i * s, data.inputs.data() + std::size_t(indices[i]) * s, s * sizeof(float));
    std::memcpy(y.data() + i * l, data.labels.data() + std::size_t(indices[i]) * l, l * sizeof(std::int32_t));
  }
#if defined(GRADSYNC_TRAINER_CUDA)
  cuda::upload(x.data(), x.size() * sizeof(float));
#endif
}

std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed, std::size_t epoch) {
  std::vector<std::uint32_t> perm(size);
  std::iota(perm.begin(), perm.end(), 0u);
  // Fisher-Yates with our own draws: the order is the same on every standard library
  std::mt19937_64 rng(seed * 1000003u + epoch);
  for (std::size_t i = size > 0 ? size - 1 : 0; i > 0; --i) std::swap(perm[i], perm[rng() % (i + 1)]);
  return perm;
}

ShardedLoader::ShardedLoader(const Dataset& data, std::size_t batch, std::size_t rank, std::size_t ranks,
                             std::uint64_t seed, bool shuffle)
    : data_(data), batch_(batch), rank_(rank), ranks_(ranks), seed_(seed), shuffle_(shuffle) {
  if (batch == 0 || ranks == 0 || rank >= ranks) throw UsageError("loader: need batch > 0, rank < ranks");
  batches_ = data.size() / ranks / batch;
  if (batches_ == 0)
    throw UsageError("loader: " + std::to_string(data.size()) + " samples cannot fill one batch of " +
                                std::to_string(batch) + " on each of " + std::to_string(ranks) + " ranks");
}

void ShardedLoader::batch(std::size_t epoch, std::size_t index, Tensor& x, std::vector<std::int32_t>& y) {
  if (index >= batches_) throw std::out_of_range("loader: batch index past the epoch");
  if (perm_epoch_ != epoch) {
    if (shuffle_) {
      perm_ = epoch_order(data_.size(), seed_, epoch);
    } else {
      perm_.resize(data_.size());
      std::iota(perm_.begin(), perm_.end(), 0u);
    }
    perm_epoch_ = epoch;
  }
  std::vector<std::uint32_t> idx(batch_);
  for (std::size_t i = 0; i < batch_; ++i) idx[i] = perm_[(index * batch_ + i) * ranks_ + rank_];
  gather_samples(data_, idx.data(), batch_, x, y);
}

}  // namespace gradsync::trainer

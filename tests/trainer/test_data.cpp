// Data: the IDX reader's validation and errors, Fashion-MNIST itself, sharding and shuffling.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <set>

#include "gradsync/trainer/data.hpp"

using namespace gradsync::trainer;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradsync_test_" + name)).string();
}
void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}
std::vector<unsigned char> header(std::uint32_t magic, std::vector<std::uint32_t> dims) {
  std::vector<unsigned char> b;
  for (std::uint32_t v : std::vector<std::uint32_t>{magic}) for (int s = 24; s >= 0; s -= 8) b.push_back(v >> s & 0xff);
  for (auto v : dims) for (int s = 24; s >= 0; s -= 8) b.push_back(v >> s & 0xff);
  return b;
}
}  // namespace

TEST_CASE("IDX reader validates and normalizes", "[trainer][data]") {
  const auto img = temp_path("img.gz"), lab = temp_path("lab.gz");
  auto images = header(0x803, {2, 2, 3});
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<unsigned char>(i * 20));
  auto labels = header(0x801, {2});
  labels.push_back(3);
  labels.push_back(9);
  write_gz(img, images);
  write_gz(lab, labels);
  const Dataset d = read_idx(img, lab, 0.5f, 0.25f);
  CHECK(d.size() == 2);
  CHECK(d.sample == Shape{1, 2, 3});
  CHECK(d.labels == std::vector<std::int32_t>{3, 9});
  CHECK(d.inputs[1] == Approx((20.0f / 255.0f - 0.5f) / 0.25f));

  SECTION("missing file names the path and the package") {
    CHECK_THROWS_WITH(read_idx(temp_path("nope.gz"), lab),
                      Catch::Contains("nope.gz") && Catch::Contains("dataset-fashion-mnist"));
  }
  SECTION("wrong magic number") {
    write_gz(img, header(0x801, {2, 2, 3}));
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("0x00000803") && Catch::Contains("dataset-fashion-mnist"));
  }
  SECTION("dimensions whose product overflows 64 bits") {
    // 4 x 2^31 x 2^31 = 2^64 wraps to 0 = the pixel bytes of an empty file: the old check passed
    // it and a batch then copied 2^62 floats.
    write_gz(img, header(0x803, {4, 1u << 31, 1u << 31}));
    auto four = header(0x801, {4});
    four.insert(four.end(), {1, 2, 3, 4});
    write_gz(lab, four);
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("img.gz") && Catch::Contains("does not match its header"));
  }
  SECTION("truncated images") {
    images.resize(images.size() - 1);
    write_gz(img, images);
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("does not match its header"));
  }
  SECTION("label count differs") {
    write_gz(lab, header(0x801, {3}));
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("lab.gz"));
  }
  SECTION("label out of range") {
    labels.back() = 10;
    write_gz(lab, labels);
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("label 10"));
  }
  SECTION("corrupt gzip stream") {
    std::FILE* f = std::fopen(img.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, 12, SEEK_SET);
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
    CHECK_THROWS_WITH(read_idx(img, lab), Catch::Contains("img.gz"));
  }
  std::filesystem::remove(img);
  std::filesystem::remove(lab);
}

TEST_CASE("Fashion-MNIST from the Debian package", "[trainer][data]") {
  const Dataset test = load_fashion_mnist(false);
  REQUIRE(test.size() == 10000);
  CHECK(test.sample == Shape{1, 28, 28});
  std::vector<int> per_class(10);
  for (auto y : test.labels) per_class.at(std::size_t(y))++;
  for (int n : per_class) CHECK(n == 1000);  // the test set is balanced
  const Dataset train = load_fashion_mnist(true);
  REQUIRE(train.size() == 60000);
  double sum = 0, sq = 0;
  for (float v : train.inputs) { sum += v; sq += double(v) * v; }
  const double n = double(train.inputs.size()), mean = sum / n;
  CHECK(mean == Approx(0.0).margin(2e-3));
  CHECK(std::sqrt(sq / n - mean * mean) == Approx(1.0).margin(2e-3));
  CHECK_THROWS_WITH(load_fashion_mnist(true, "/nonexistent"), Catch::Contains("/nonexistent/train-images-idx3-ubyte.gz"));
}

TEST_CASE("Sharded loader: disjoint shards, reshuffled per epoch, reproducible", "[trainer][data]") {
  const Dataset d = synthetic_images({1, 2, 2}, 3, 100, 1);
  auto ids = [&](std::size_t rank, std::size_t epoch, std::uint64_t seed) {
    ShardedLoader loader(d, 8, rank, 3, seed);
    REQUIRE(loader.batches_per_epoch() == 4);  // 100 / 3 ranks = 33 -> 4 batches of 8
    std::vector<float> first;
    Tensor x;
    std::vector<std::int32_t> y;
    for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
      loader.batch(epoch, b, x, y);
      for (std::size_t i = 0; i < 8; ++i) first.push_back(x[i * 4]);  // first pixel identifies a sample
    }
    return first;
  };
  std::set<float> seen;
  for (std::size_t r = 0; r < 3; ++r)
    for (float v : ids(r, 0, 5)) CHECK(seen.insert(v).second);
  CHECK(seen.size() == 96);
  CHECK(ids(1, 0, 5) == ids(1, 0, 5));
  CHECK(ids(1, 0, 5) != ids(1, 1, 5));
  CHECK(ids(1, 0, 5) != ids(1, 0, 6));
  CHECK_THROWS_WITH(ShardedLoader(d, 40, 0, 3, 1), Catch::Contains("cannot fill one batch"));
}

TEST_CASE("epoch_order is a permutation and the order the loader reads", "[trainer][data]") {
  Dataset d = synthetic_images({1, 1, 1}, 2, 50, 1);
  for (std::size_t i = 0; i < d.size(); ++i) d.inputs[i] = float(i);  // each sample's pixel is its index
  const std::vector<std::uint32_t> order = epoch_order(d.size(), 7, 3);
  std::vector<std::uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> all(d.size());
  std::iota(all.begin(), all.end(), 0u);
  CHECK(sorted == all);
  CHECK(order != all);
  CHECK(order != epoch_order(d.size(), 7, 4));
  // One rank reads the order batch by batch (trainer_vs_pytorch --accuracy --same-start relies on it)
  ShardedLoader loader(d, 10, 0, 1, 7);
  Tensor x;
  std::vector<std::int32_t> y;
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
    loader.batch(3, b, x, y);
    for (std::size_t i = 0; i < 10; ++i) CHECK(x[i] == float(order[b * 10 + i]));
  }
}

TEST_CASE("Synthetic tokens follow their successor rule mostly", "[trainer][data]") {
  const Dataset d = synthetic_tokens(10, 50, 20, 3);
  CHECK(d.size() == 20);
  CHECK(d.labels_per_sample == 10);
  std::size_t follows = 0;
  for (std::size_t i = 0; i < d.labels.size(); ++i)
    follows += std::size_t(d.labels[i]) == (std::size_t(d.inputs[i]) * 31 + 7) % 50;
  CHECK(follows > d.labels.size() * 3 / 4);
}

// The study's small-tensor rule (codec/bypass.hpp): the threshold keeps more than 99% of the
// parameters compressed, per tensor.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include <gradsync/codec/any.hpp>
#include <gradsync/codec/bypass.hpp>
#include <gradsync/codec/traits.hpp>

using namespace gradsync::codec;

namespace {
std::size_t fp32_elements(const std::vector<std::size_t>& sizes, std::size_t threshold) {
  std::size_t n = 0;
  for (std::size_t s : sizes) n += s < threshold ? s : 0;
  return n;
}

/// torchvision ResNet-50: conv1, 16 bottlenecks (4 with a projection), fc; BN has 2 tensors.
std::vector<std::size_t> resnet50() {
  std::vector<std::size_t> sizes{64 * 3 * 7 * 7, 64, 64};
  std::size_t in = 64;
  for (auto [planes, blocks] : {std::pair<std::size_t, int>{64, 3}, {128, 4}, {256, 6}, {512, 3}})
    for (int b = 0; b < blocks; ++b) {
      for (std::size_t w : {in * planes, planes * planes * 9, planes * planes * 4}) sizes.push_back(w);
      for (std::size_t bn : {planes, planes, planes, planes, 4 * planes, 4 * planes}) sizes.push_back(bn);
      if (b == 0) sizes.insert(sizes.end(), {in * planes * 4, 4 * planes, 4 * planes});
      in = 4 * planes;
    }
  sizes.insert(sizes.end(), {2048 * 1000, 1000});
  return sizes;
}
}  // namespace

TEST_CASE("the automatic threshold compresses more than 99% of ResNet-50's parameters", "[codec][bypass]") {
  const auto sizes = resnet50();
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  REQUIRE(sizes.size() == 161);
  REQUIRE(total == 25'557'032);
  const std::size_t t = bypass_threshold(sizes, bypass_auto);
  CHECK(t == 36'864);
  CHECK(fp32_elements(sizes, t) == 198'696);
  CHECK(double(fp32_elements(sizes, t)) / double(total) < 0.01);
  // and it is the largest such threshold: the next tensor size up would leave more in fp32
  std::size_t next = SIZE_MAX;
  for (std::size_t s : sizes) next = s > t ? std::min(next, s) : next;
  CHECK(double(fp32_elements(sizes, next)) / double(total) >= 0.01);
}

TEST_CASE("the automatic threshold on small and uniform models compresses everything", "[codec][bypass]") {
  CHECK(fp32_elements({1000, 1000, 1000}, bypass_threshold(std::vector<std::size_t>{1000, 1000, 1000}, bypass_auto)) == 0);
  const std::vector<std::size_t> one{5};
  CHECK(bypass_threshold(one, bypass_auto) == 5);  // nothing is under it
  // a tiny tensor next to a big one: under 1%, so it goes as fp32
  const std::vector<std::size_t> skew{10, 100'000};
  CHECK(fp32_elements(skew, bypass_threshold(skew, bypass_auto)) == 10);
  // two tensors of 1% each: together they are not under 1%, so neither goes as fp32
  const std::vector<std::size_t> ties{1000, 1000, 98'000};
  CHECK(fp32_elements(ties, bypass_threshold(ties, bypass_auto)) == 0);
}

TEST_CASE("an explicit bypass is used as given - codecs report their knob in their traits", "[codec][bypass]") {
  const std::vector<std::size_t> sizes{10, 100, 1000};
  CHECK(bypass_threshold(sizes, 0) == 0);
  CHECK(bypass_threshold(sizes, 101) == 101);
  CHECK(AnyCodec::parse("qsgd8").traits().bypass_below == bypass_auto);
  CHECK(AnyCodec::parse("qsgd8:bypass=77").traits().bypass_below == 77);
  CHECK(AnyCodec::parse("ef+qsgd4:bypass=9").traits().bypass_below == 9);
  CHECK(AnyCodec::parse("onebit:bypass=auto").traits().bypass_below == bypass_auto);
  CHECK(AnyCodec::parse("fp16").traits().bypass_below == 0);
  CHECK(AnyCodec::parse("fp32").traits().bypass_below == 0);
  CHECK(AnyCodec::parse("qsgd8:bucket=1024").traits().grain == 1024);
  CHECK(AnyCodec::parse("ef+qsgd2").traits().grain == 128);
  CHECK(AnyCodec::parse("onebit").traits().grain == 64);
  CHECK(AnyCodec::parse("topk").traits().grain == 1);
  CHECK(AnyCodec::parse("fp32").traits().grain == 1);
}

TEST_CASE("a codec encodes every message, however small: the bypass is the Synchronizer's, per tensor", "[codec][bypass]") {
  const std::vector<float> v(10, 0.5f);
  for (const char* spec : {"qsgd8", "onebit", "topk", "fp16"}) {
    INFO(spec);
    const AnyCodec c = AnyCodec::parse(spec);
    std::vector<std::byte> wire(c.encoded_bytes(v.size()));
    c.encode(v, wire, {});
    CHECK(static_cast<int>(wire[3]) != Identity::id);
  }
}

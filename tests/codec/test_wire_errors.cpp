// Every decoder rejects a bad payload with WireError before touching memory it does not own:
// truncated, oversized, another codec's, another unit size's, corrupted header bytes, random
// bytes. Run under the asan preset as well.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "codec_cases.hpp"
#include "test_util.hpp"

using gradsync::WireError;
using gradsync::codec::AnyCodec;

namespace {
constexpr std::size_t n = 1000;

std::vector<std::byte> valid_wire(const AnyCodec& c) { return test_util::encode(c, test_util::gaussian(n, 41)); }
}  // namespace

TEST_CASE("truncated and oversized payloads are rejected", "[codec][wire]") {
  for (std::string_view spec : codec_cases::specs) {
    INFO(spec);
    const auto c = codec_cases::make(spec);
    const auto wire = valid_wire(c);
    std::vector<float> out(n);
    for (std::size_t len = 0; len < wire.size(); len += 1 + len / 8)
      CHECK_THROWS_AS(c.decode(std::span(wire).first(len), out), WireError);
    CHECK_THROWS_AS(c.decode(std::span(wire).first(wire.size() - 1), out), WireError);
    auto longer = wire;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(c.decode(longer, out), WireError);
    CHECK_THROWS_AS(c.decode_add(longer, out), WireError);
  }
}

TEST_CASE("another codec's payload or another unit size is rejected", "[codec][wire]") {
  for (std::string_view from : codec_cases::specs)
    for (std::string_view to : codec_cases::specs) {
      const auto a = codec_cases::make(from), b = codec_cases::make(to);
      const auto wire = valid_wire(a);
      const auto own = valid_wire(b);
      if (std::equal(wire.begin(), wire.begin() + gradsync::codec::header_bytes, own.begin())) {
        // Same id, layout and size (qsgd2 and ef+qsgd2): readable by design.
        std::vector<float> x(n);
        b.decode(wire, x);
        continue;
      }
      INFO(from << " decoded as " << to);
      std::vector<float> out(n);
      CHECK_THROWS_AS(b.decode(wire, out), WireError);
    }
  for (std::string_view spec : codec_cases::specs) {
    INFO(spec);
    const auto c = codec_cases::make(spec);
    const auto wire = valid_wire(c);
    std::vector<float> shorter(n - 1), longer(n + 1);
    CHECK_THROWS_AS(c.decode(wire, shorter), WireError);
    CHECK_THROWS_AS(c.decode_add(wire, longer), WireError);
  }
}

TEST_CASE("a different bucket option is rejected", "[codec][wire]") {
  const auto a = AnyCodec::parse("qsgd8:bypass=0"), b = AnyCodec::parse("qsgd8:bucket=256:bypass=0");
  std::vector<float> out(4096);
  CHECK_THROWS_AS(b.decode(test_util::encode(a, test_util::gaussian(4096, 1)), out), WireError);
  const auto t1 = AnyCodec::parse("topk:0.1:bypass=0"), t2 = AnyCodec::parse("topk:0.2:bypass=0");
  CHECK_THROWS_AS(t2.decode(test_util::encode(t1, test_util::gaussian(4096, 1)), out), WireError);
}

TEST_CASE("every corrupted header byte is rejected", "[codec][wire]") {
  for (std::string_view spec : codec_cases::specs) {
    INFO(spec);
    const auto c = codec_cases::make(spec);
    const auto wire = valid_wire(c);
    std::vector<float> out(n);
    for (std::size_t byte = 0; byte < gradsync::codec::header_bytes; ++byte)
      for (int bit = 0; bit < 8; ++bit) {
        auto bad = wire;
        bad[byte] ^= std::byte(1u << bit);
        INFO("byte " << byte << " bit " << bit);
        CHECK_THROWS_AS(c.decode(bad, out), WireError);
      }
  }
}

TEST_CASE("TopK rejects out-of-range, repeated and unordered indices without touching the output", "[codec][wire]") {
  const auto c = AnyCodec::parse("topk:0.01:bypass=0");
  auto wire = valid_wire(c);  // k = 10
  const std::size_t k = 10;
  std::vector<float> out(n, 1.0f);
  auto put = [&](std::size_t j, std::uint32_t i) { std::memcpy(wire.data() + gradsync::codec::header_bytes + 4 * j, &i, 4); };
  auto original = wire;
  put(k - 1, n);  // out of range
  CHECK_THROWS_AS(c.decode_add(wire, out), WireError);
  wire = original;
  std::uint32_t first;
  std::memcpy(&first, wire.data() + gradsync::codec::header_bytes, 4);
  put(1, first);  // repeated
  CHECK_THROWS_AS(c.decode_add(wire, out), WireError);
  CHECK(out == std::vector<float>(n, 1.0f));
}

TEST_CASE("random bytes are rejected - random payloads behind a valid header never read out of bounds", "[codec][wire]") {
  std::mt19937 gen(77);
  for (std::string_view spec : codec_cases::specs) {
    INFO(spec);
    const auto c = codec_cases::make(spec);
    std::vector<float> out(n);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::byte> junk(gen() % (2 * c.encoded_bytes(n) + 1));
      for (auto& b : junk) b = std::byte(gen());
      CHECK_THROWS_AS(c.decode(junk, out), WireError);
    }
    const auto wire = valid_wire(c);
    for (int trial = 0; trial < 50; ++trial) {
      auto bad = wire;
      for (std::size_t i = gradsync::codec::header_bytes; i < bad.size(); ++i) bad[i] = std::byte(gen());
      try {
        c.decode_add(bad, out);  // QSGD, 1-bit and fp16 accept any bits; TopK validates indices
      } catch (const WireError&) {
      }
    }
  }
}

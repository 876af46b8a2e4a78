// Device codecs against the host codecs on the same inputs and seeds: byte-identical wire forms,
// identical residuals, identical decodes either way (a CUDA rank and a host rank interoperate),
// the collectives' owner step (decode_add_encode) as the host does it, and the host's rejections
// of bad payloads - at once (a decode without a status) or through a WireStatus, with the output
// untouched. Every buffer layout: 16-byte aligned, floats off by 4 bytes, wire off by 4 bytes.
// Needs a GPU (registered by GRADSYNC_GPU_TESTS); tests/cuda/test_host_twins.cpp runs the same
// cases through the kernels' host twins everywhere.
#include <bit>
#include <cmath>
#include <cstdint>

#include <catch2/catch.hpp>

#include <gradsync/cuda/codec.cuh>

#include "device_cases.hpp"

using namespace gradsync::codec;
using device_cases::host_error;
using device_cases::same_bits;
using gradsync::cuda::check;

namespace {
/// A device copy of a host vector, `skew` elements past a 16-byte boundary.
template <class T>
struct Device {
  T* base = nullptr;
  T* p;
  std::size_t n;
  explicit Device(const std::vector<T>& h, std::size_t skew = 0) : n(h.size()) {
    check(cudaMalloc(&base, (n + skew) * sizeof(T) + 64), "cudaMalloc");
    p = base + skew;
    check(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Device(const Device&) = delete;
  ~Device() { cudaFree(base); }
  std::span<T> span() const { return {p, n}; }
  std::vector<T> host() const {
    std::vector<T> h(n);
    check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
  }
};

struct Layout {
  std::size_t floats, wire;  // elements past 16-byte alignment
  const char* name;
};
constexpr Layout layouts[] = {{0, 0, "aligned"}, {1, 0, "floats off by 4 bytes"}, {0, 4, "wire off by 4 bytes"}};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { check(cudaStreamCreate(&s), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s); }
};
}  // namespace

TEST_CASE("Device encode, decode, decode_add and decode_add_encode give the host codecs' results", "[gpu][codec]") {
  const Stream stream;
  gradsync::cuda::WireStatus status(stream.s);
  for (const char* name : device_cases::codecs)
    for (const std::size_t n : device_cases::sizes)
      for (const Layout& layout : layouts) {
        CAPTURE(name, n, layout.name);
        const auto c = AnyCodec::parse(name);
        const device_cases::Expected want(c, n);

        Device<float> d_in(want.v, layout.floats), d_res(want.r0, layout.floats);
        Device<std::byte> d_wire(std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}), layout.wire);
        auto ctx = want.ctx;
        ctx.residual = d_res.span();
        REQUIRE(gradsync::cuda::encode(c, d_in.span(), d_wire.span(), ctx, stream.s) == want.wire.size());
        check(cudaStreamSynchronize(stream.s), "cudaStreamSynchronize");
        CHECK(d_wire.host() == want.wire);
        CHECK(same_bits(d_res.host(), want.residual));

        // The host's bytes decoded on the device, without a status (it throws at once) and with one.
        Device<std::byte> d_host(want.wire, layout.wire);
        Device<float> d_out(want.base, layout.floats), d_sum(want.base, layout.floats);
        gradsync::cuda::decode(c, d_host.span(), d_out.span(), stream.s);
        gradsync::cuda::decode_add(c, d_host.span(), d_sum.span(), stream.s);
        CHECK(same_bits(d_out.host(), want.decoded));
        CHECK(same_bits(d_sum.host(), want.summed));
        Device<float> a_out(want.base, layout.floats), a_sum(want.base, layout.floats);
        gradsync::cuda::decode(c, d_host.span(), a_out.span(), status, stream.s);
        gradsync::cuda::decode_add(c, d_host.span(), a_sum.span(), status, stream.s);
        status.check(stream.s);
        CHECK(same_bits(a_out.host(), want.decoded));
        CHECK(same_bits(a_sum.host(), want.summed));

        // The owner step: a sum, and a mean over 3 ranks.
        for (int m = 0; m < 2; ++m) {
          CAPTURE(want.means[m]);
          Device<float> d_acc(want.base, layout.floats), d_e(want.r0, layout.floats);
          Device<std::byte> d_sent(std::vector<std::byte>(c.encoded_bytes(n)), layout.wire);
          ctx.residual = d_e.span();
          const std::size_t bytes = gradsync::cuda::decode_add_encode(c, d_host.span(), d_acc.span(), d_sent.span(), ctx,
                                                                      status, stream.s, want.means[m]);
          status.check(stream.s);
          REQUIRE(bytes == want.steps[m].wire.size());
          CHECK(d_sent.host() == want.steps[m].wire);
          CHECK(same_bits(d_acc.host(), want.steps[m].acc));
          CHECK(same_bits(d_e.host(), want.steps[m].residual));
        }
      }
}

TEST_CASE("Device codecs on a 4M-element unit (every grid-stride loop turns) give the host's bytes", "[gpu][codec]") {
  const std::size_t n = std::size_t{1} << 22;
  const auto v = device_cases::inputs(n, 21);
  for (const char* name : {"fp16", "qsgd8", "qsgd4", "onebit", "topk:0.01"}) {
    CAPTURE(name);
    const auto c = AnyCodec::parse(name);
    auto residual = device_cases::residual_for(c, n);
    const Device<float> d_in(v), d_res(residual);
    Device<std::byte> d_wire(std::vector<std::byte>(c.encoded_bytes(n)));
    const auto host = test_util::encode(c, v, {.seed = 3, .residual = residual});
    const std::size_t bytes = gradsync::cuda::encode(c, d_in.span(), d_wire.span(), {.seed = 3, .residual = d_res.span()});
    REQUIRE(bytes == host.size());
    CHECK(d_wire.host() == host);
    CHECK(same_bits(d_res.host(), residual));
    Device<float> d_sum(v);
    gradsync::cuda::decode_add(c, d_wire.span(), d_sum.span());
    auto sum = v;
    c.decode_add(host, sum);
    CHECK(same_bits(d_sum.host(), sum));
  }
}

TEST_CASE("Device fp16 and bf16 decode every 16-bit pattern as the host does (subnormals, Inf, NaN payloads)",
          "[gpu][codec]") {
  const std::size_t n = 65536;
  for (const char* name : {"fp16", "bf16"}) {
    CAPTURE(name);
    const auto c = AnyCodec::parse(name);
    auto wire = test_util::encode(c, std::vector<float>(n), {});
    for (std::size_t i = 0; i < n; ++i) {  // the payload: every pattern once, after the header
      const auto pattern = static_cast<std::uint16_t>(i);
      std::memcpy(wire.data() + header_bytes + 2 * i, &pattern, 2);
    }
    std::vector<float> want(n), want_sum(n, 1.0f);
    c.decode(wire, want);
    c.decode_add(wire, want_sum);
    const Device<std::byte> d_wire(wire);
    Device<float> d_out{std::vector<float>(n)}, d_sum{std::vector<float>(n, 1.0f)};
    gradsync::cuda::decode(c, d_wire.span(), d_out.span());
    gradsync::cuda::decode_add(c, d_wire.span(), d_sum.span());
    CHECK(same_bits(d_out.host(), want));
    // 1 + NaN is a NaN on both, but the GPU's adder returns its canonical NaN where x86 keeps the
    // operand's payload: the sums agree bit for bit everywhere else.
    const auto got_sum = d_sum.host();
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i)
      differ += std::isnan(want_sum[i]) ? !std::isnan(got_sum[i]) : std::bit_cast<std::uint32_t>(got_sum[i]) != std::bit_cast<std::uint32_t>(want_sum[i]);
    CHECK(differ == 0);
  }
}

TEST_CASE("Device top-k keeps the host's set on ties, zeros and equal values", "[gpu][codec]") {
  const std::size_t n = 20'011;
  std::vector<std::vector<float>> cases{std::vector<float>(n, 0.0f), std::vector<float>(n, 1.5f),
                                        std::vector<float>(n, -0.0f)};
  cases.emplace_back(n);
  for (std::size_t i = 0; i < n; ++i) cases.back()[i] = i % 3 == 0 ? -1.0f : i % 3 == 1 ? 1.0f : 0.5f;
  for (const float ratio : {0.001f, 0.01f, 0.5f, 1.0f})
    for (const auto& v : cases) {
      CAPTURE(ratio, v[0], v[1]);
      const AnyCodec c = TopK{.ratio = ratio};
      const Device<float> d_in(v);
      Device<std::byte> d_wire(std::vector<std::byte>(c.encoded_bytes(n)));
      gradsync::cuda::encode(c, d_in.span(), d_wire.span());
      CHECK(d_wire.host() == test_util::encode(c, v));
    }
}

TEST_CASE("A bad device wire form gives the host's WireError and touches nothing", "[gpu][codec]") {
  const std::size_t n = 50'000;
  const auto v = device_cases::inputs(n, 3);
  const Stream stream;
  gradsync::cuda::WireStatus status(stream.s);
  for (const char* name : device_cases::codecs) {
    CAPTURE(name);
    const auto c = AnyCodec::parse(name);
    const auto wire = device_cases::wire_of(c, v);
    for (const std::size_t byte : {0u, 2u, 3u, 4u, 8u, 12u}) {  // magic, version, codec id, elements, bucket, size
      CAPTURE(byte);
      auto bad = wire;
      bad[byte] ^= std::byte{0x41};
      const std::string error = host_error(c, bad, n);
      REQUIRE(!error.empty());
      const Device<std::byte> d_bad(bad);
      Device<float> d_acc(std::vector<float>(n, 2.0f)), d_res(std::vector<float>(n, 3.0f));
      Device<std::byte> d_out(std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}));
      CHECK_THROWS_WITH(gradsync::cuda::decode(c, d_bad.span(), d_acc.span(), stream.s), error);
      gradsync::cuda::decode_add(c, d_bad.span(), d_acc.span(), status, stream.s);  // no throw: asynchronous
      CHECK_THROWS_WITH(status.check(stream.s), error);
      gradsync::cuda::decode_add_encode(c, d_bad.span(), d_acc.span(), d_out.span(), {.residual = d_res.span()}, status,
                                        stream.s, 2);
      CHECK_THROWS_WITH(status.check(stream.s), error);
      CHECK_NOTHROW(status.check(stream.s));  // cleared
      CHECK(d_acc.host() == std::vector<float>(n, 2.0f));
      CHECK(d_res.host() == std::vector<float>(n, 3.0f));
      CHECK(d_out.host() == std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}));
    }
    // Sizes alone throw at the call.
    const Device<std::byte> d_short(std::vector<std::byte>(wire.begin(), wire.end() - 1));
    Device<float> d_acc{std::vector<float>(n)};
    CHECK_THROWS_AS(gradsync::cuda::decode_add(c, d_short.span(), d_acc.span(), status, stream.s), gradsync::WireError);
    CHECK_THROWS_AS(gradsync::cuda::decode(c, d_short.span().first(15), d_acc.span(), stream.s), gradsync::WireError);
  }

  SECTION("top-k indices: the lowest bad position, the host's message") {
    const AnyCodec c = TopK{.ratio = 0.01f};
    auto wire = test_util::encode(c, v);
    gradsync::codec::detail::store(wire.data() + header_bytes + 8, std::uint32_t{0});  // the third index
    gradsync::codec::detail::store(wire.data() + header_bytes + 40, static_cast<std::uint32_t>(n));  // the 11th: out of range
    const std::string error = host_error(c, wire, n);
    REQUIRE_THAT(error, Catch::Contains("position 2"));
    const Device<std::byte> d(wire);
    Device<float> d_acc(std::vector<float>(n, 2.0f)), d_res(std::vector<float>(n, 3.0f));
    Device<std::byte> d_out(std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}));
    CHECK_THROWS_WITH(gradsync::cuda::decode(c, d.span(), d_acc.span(), stream.s), error);
    CHECK_THROWS_WITH(gradsync::cuda::decode_add(c, d.span(), d_acc.span(), stream.s), error);
    gradsync::cuda::decode_add_encode(c, d.span(), d_acc.span(), d_out.span(), {.residual = d_res.span()}, status, stream.s, 2);
    CHECK_THROWS_WITH(status.check(stream.s), error);
    CHECK(d_acc.host() == std::vector<float>(n, 2.0f));
    CHECK(d_res.host() == std::vector<float>(n, 3.0f));
    CHECK(d_out.host() == std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}));
  }

  SECTION("the first fault since the last check is reported; good decodes still run") {
    for (const char* name : device_cases::codecs) {
      CAPTURE(name);
      const auto c = AnyCodec::parse(name);
      const auto wire = device_cases::wire_of(c, v);
      auto wrong_codec = wire, wrong_elements = wire;
      wrong_codec[3] ^= std::byte{0x41};
      wrong_elements[4] ^= std::byte{1};
      const Device<std::byte> d_good(wire), d_codec(wrong_codec), d_elements(wrong_elements);
      Device<float> d_acc(std::vector<float>(n, 0.0f));
      gradsync::cuda::decode_add(c, d_codec.span(), d_acc.span(), status, stream.s);
      gradsync::cuda::decode_add(c, d_elements.span(), d_acc.span(), status, stream.s);
      gradsync::cuda::decode_add(c, d_good.span(), d_acc.span(), status, stream.s);
      CHECK_THROWS_WITH(status.check(stream.s), host_error(c, wrong_codec, n));
      CHECK_NOTHROW(status.check(stream.s));
      // 0 + decode, not decode: +0.0f + -0.0f is +0.0f, and QSGD decodes a negative level 0 as -0.0f
      std::vector<float> sum(n, 0.0f);
      c.decode_add(wire, sum);
      CHECK(same_bits(d_acc.host(), sum));
    }
  }
}

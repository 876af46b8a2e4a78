// Device codecs against the host codecs on the same inputs and seeds: byte-identical wire forms,
// identical residuals, identical decodes either way (a CUDA rank and a host rank interoperate),
// and the same rejections of bad payloads. Needs a GPU (registered by GRADSYNC_GPU_TESTS).
#include <catch2/catch.hpp>

#include <gradsync/cuda/codec.cuh>
#include "codec/test_util.hpp"

using namespace gradsync::codec;

namespace {
template <class T>
struct Device {  // a device copy of a host vector
  T* p = nullptr;
  std::size_t n;
  explicit Device(const std::vector<T>& h) : n(h.size()) {
    gradsync::cuda::check(cudaMalloc(&p, n * sizeof(T) + 1), "cudaMalloc");
    gradsync::cuda::check(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Device(const Device&) = delete;
  ~Device() { cudaFree(p); }
  std::span<T> span() const { return {p, n}; }
  std::vector<T> host() const {
    std::vector<T> h(n);
    gradsync::cuda::check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
  }
};

std::vector<float> inputs(std::size_t n, unsigned seed) {
  auto v = test_util::gaussian(n, seed);
  for (std::size_t i = 0; i < n; i += 97) v[i] = 0.0f;
  for (std::size_t i = 0; i < 700 && i < n; ++i) v[i] = 0.0f;  // a zero bucket
  for (std::size_t i = 1000; i < n; i += 151) v[i] = (i % 2 ? -2.6f : 2.6f);  // top-k ties
  return v;
}

const char* const codecs[] = {"fp32", "fp16", "bf16", "qsgd2", "qsgd4", "qsgd8", "qsgd16", "qsgd8:norm=l2",
                              "qsgd4:bucket=1024:norm=l2", "onebit", "topk:0.01", "topk:0.3", "ef+fp16",
                              "ef+qsgd4", "ef+qsgd2:norm=l2"};
}  // namespace

TEST_CASE("Device encode gives the host's bytes and residual", "[gpu][codec]") {
  for (const char* name : codecs)
    for (const char* bypass : {"", ":bypass=0"})
      for (std::size_t n : {1000u, 100'003u}) {
        const std::string text = std::string(name) + (std::string(name) == "fp32" ? "" : bypass);
        CAPTURE(text, n);
        const auto c = AnyCodec::parse(text);
        const auto v = inputs(n, unsigned(n));
        const EncodeContext ctx{.seed = 7, .iteration = 4, .unit = 3, .stream = 2};
        std::vector<float> residual = c.needs_residual() ? test_util::gaussian(n, 5, 0.1f) : std::vector<float>{};
        Device<float> d_in(v), d_res(residual);
        Device<std::byte> d_wire(std::vector<std::byte>(c.encoded_bytes(n)));
        auto dctx = ctx;
        dctx.residual = d_res.span().first(residual.size());
        const std::size_t dev_bytes = gradsync::cuda::encode(c, d_in.span(), d_wire.span(), dctx);
        auto hctx = ctx;
        hctx.residual = residual;
        const auto host = test_util::encode(c, v, hctx);
        REQUIRE(dev_bytes == host.size());
        auto dev = d_wire.host();
        dev.resize(dev_bytes);
        CHECK(dev == host);
        CHECK(d_res.host() == residual);

        // Host decodes the device's wire, the device decodes the host's: the same floats.
        const auto host_decoded = test_util::decode(c, dev, n);
        Device<float> d_out(std::vector<float>(n, 1.0f));
        gradsync::cuda::decode(c, d_wire.span().first(dev_bytes), d_out.span());
        CHECK(d_out.host() == host_decoded);
        Device<float> d_acc(v);
        gradsync::cuda::decode_add(c, d_wire.span().first(dev_bytes), d_acc.span());
        auto acc = v;
        c.decode_add(host, acc);
        CHECK(d_acc.host() == acc);
      }
}

TEST_CASE("Device decode rejects what the host rejects", "[gpu][codec]") {
  const std::size_t n = 50'000;
  const auto v = inputs(n, 3);
  for (const char* name : {"fp32", "qsgd4", "topk:0.01"}) {
    CAPTURE(name);
    const auto c = AnyCodec::parse(name);
    auto wire = test_util::encode(c, v);
    Device<float> d_out{std::vector<float>(n)};
    {
      Device<std::byte> d(std::vector<std::byte>(wire.begin(), wire.end() - 1));  // truncated
      CHECK_THROWS_AS(gradsync::cuda::decode(c, d.span(), d_out.span()), gradsync::WireError);
    }
    {
      auto bad = wire;
      bad[3] = std::byte{99};  // codec id
      Device<std::byte> d(bad);
      CHECK_THROWS_AS(gradsync::cuda::decode(c, d.span(), d_out.span()), gradsync::WireError);
    }
  }
  const auto c = AnyCodec::parse("topk:0.01");
  auto wire = test_util::encode(c, v);
  gradsync::codec::detail::store(wire.data() + header_bytes + 8, std::uint32_t{0});  // third index not ascending
  Device<std::byte> d(wire);
  Device<float> d_out(std::vector<float>(n, 2.0f));
  CHECK_THROWS_WITH(gradsync::cuda::decode(c, d.span(), d_out.span()), Catch::Contains("position 2"));
  CHECK(d_out.host() == std::vector<float>(n, 2.0f));  // untouched
}

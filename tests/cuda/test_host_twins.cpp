// The host twins of the device codecs (include/gradsync/cuda/codec.cuh), run on the host: the
// device's decomposition of each step (per-bucket scale split over a block's threads, QSGD
// packing one word per index, top-k by stable sort) gives exactly the host codec's bytes. The
// element-wise functors both backends share are covered by the host codec tests (tests/codec):
// Narrow* (host chunks), Qsgd{Encode,Decode}, OneBit{Encode,Decode}, Add, AddWire,
// Sum, Error, TopKIndexBad, TopKScatter; QsgdPackWord, QsgdDecodeElement, Narrow* one element per
// index, TopKKey and TopKPut are covered here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <gradsync/codec/any.hpp>
#include <gradsync/collective/any.hpp>
#include "codec/test_util.hpp"

namespace gd = gradsync::codec::detail;
using namespace gradsync::codec;

namespace {
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr unsigned block_threads = 128;  // cuda/codec.cuh scale_threads

/// The device's scale of one bucket: max as a reduction of per-thread strided maxima; l2 as 16
/// lanes, one per thread, folded in order.
float device_scale(const float* v, std::size_t len, bool l2) {
  if (l2) {
    float lanes[gd::reduce_lanes];
    for (std::size_t l = 0; l < gd::reduce_lanes; ++l) lanes[l] = gd::lane_sum_squares(v, len, l);
    return std::sqrt(gd::fold_lanes(lanes));
  }
  std::uint32_t m[block_threads] = {};
  for (std::size_t i = 0; i < len; ++i) m[i % block_threads] = std::max(m[i % block_threads], gd::magnitude_bits(v[i]));
  return gd::bits_float(*std::max_element(m, m + block_threads));  // any order: integer max
}

/// Inputs with what the kernels must get right: a partial last bucket, zeros, a zero bucket, ties.
std::vector<float> inputs(std::size_t n) {
  auto v = test_util::gaussian(n, 11);
  for (std::size_t i = 0; i < n; i += 97) v[i] = 0.0f;
  for (std::size_t i = 0; i < 700 && i < n; ++i) v[i] = 0.0f;  // bucket 0 (and 1) all zero
  for (std::size_t i = 1000; i < n; i += 211) v[i] = (i % 2 ? -1.5f : 1.5f);
  return v;
}

template <unsigned Bits>
void check_qsgd(const Qsgd<Bits>& c) {
  const std::size_t n = 100'003;
  const auto v = inputs(n);
  const EncodeContext ctx{.seed = 5, .iteration = 3, .unit = 2, .stream = 1};
  const auto host = test_util::encode(c, v, ctx);
  std::vector<std::byte> dev(host.size());
  std::copy_n(host.begin(), header_bytes, dev.begin());  // the header is written from the host on both
  std::byte* payload = dev.data() + header_bytes;
  using L = gd::QsgdLayout<Bits>;
  for (std::size_t b = 0; b < gd::bucket_count(n, c.bucket); ++b) {
    const auto [begin, len] = gd::bucket_range(b, c.bucket, n);
    gd::store(payload + b * L::record_bytes(c.bucket), device_scale(v.data() + begin, len, c.norm == QsgdNorm::l2));
  }
  gd::for_each_index(thrust::host, gd::QsgdPackWordKernel<Bits>::indices(n, c.bucket),
                     gd::QsgdPackWordKernel<Bits>{v.data(), payload, n, c.bucket, gd::stream_key(ctx)});
  CHECK(dev == host);

  // Decode one element per index, as the device does: the host's values, bit for bit.
  const std::span<const std::byte> wire(host);
  const auto base = test_util::gaussian(n, 13);
  std::vector<float> want(n), got(n), want_sum = base, got_sum = base;
  c.decode(wire, want);
  c.decode_add(wire, want_sum);
  gd::for_each_index(thrust::host, n, gd::QsgdDecodeElementKernel<Bits, false>{payload, got.data(), c.bucket});
  gd::for_each_index(thrust::host, n, gd::QsgdDecodeElementKernel<Bits, true>{payload, got_sum.data(), c.bucket});
  CHECK(same_bits(got, want));
  CHECK(same_bits(got_sum, want_sum));
}

/// fp16/bf16 one element per index (the device's chunk of 1): the host's bytes and values.
template <class Format>
void check_narrow() {
  const std::size_t n = 10'007;
  const auto v = inputs(n);
  std::vector<std::byte> host(2 * n), dev(2 * n);
  gd::for_each_index(thrust::host, gd::bucket_count(n, gd::narrow_chunk), gd::NarrowEncodeKernel<Format>{v.data(), host.data(), n});
  gd::for_each_index(thrust::host, n, gd::NarrowEncodeKernel<Format>{v.data(), dev.data(), n, 1});
  CHECK(dev == host);
  std::vector<float> want = v, got = v;
  gd::for_each_index(thrust::host, gd::bucket_count(n, gd::narrow_chunk), gd::NarrowDecodeKernel<Format, true>{host.data(), want.data(), n});
  gd::for_each_index(thrust::host, n, gd::NarrowDecodeKernel<Format, true>{dev.data(), got.data(), n, 1});
  CHECK(same_bits(got, want));
}
}  // namespace

TEST_CASE("Device fp16/bf16 (one element per index) give the host bytes and values", "[cuda][twin]") {
  check_narrow<gd::Fp16Format>();
  check_narrow<gd::Bf16Format>();
}

TEST_CASE("Device QSGD decomposition (block scale, one word per index - decode one element per index) gives the host bytes", "[cuda][twin]") {
  for (auto norm : {QsgdNorm::max, QsgdNorm::l2}) {
    check_qsgd(Qsgd<2>{.norm = norm, .bypass_below = 0});
    check_qsgd(Qsgd<4>{.bucket = 1024, .norm = norm, .bypass_below = 0});
    check_qsgd(Qsgd<8>{.norm = norm, .bypass_below = 0});
    check_qsgd(Qsgd<16>{.norm = norm, .bypass_below = 0});
  }
}

TEST_CASE("The 2-norm lanes are the host's order", "[cuda][twin]") {
  for (std::size_t len : {1u, 15u, 16u, 17u, 511u, 512u}) {
    const auto v = test_util::gaussian(len, unsigned(len));
    float lanes[gd::reduce_lanes];
    for (std::size_t l = 0; l < gd::reduce_lanes; ++l) lanes[l] = gd::lane_sum_squares(v.data(), len, l);
    CHECK(gd::float_bits(gd::fold_lanes(lanes)) == gd::float_bits(gd::sum_squares(v.data(), len)));
  }
}

TEST_CASE("Device top-k (stable sort by descending magnitude) picks the host's indices", "[cuda][twin]") {
  const TopK c{.ratio = 0.01f, .bypass_below = 0};
  const std::size_t n = 100'003, k = c.kept(n);
  auto g = inputs(n);
  for (std::size_t i = 0; i < 600; ++i) g[150 * i + 3] = (i % 2 ? -2.6f : 2.6f);  // ties at the threshold
  const auto r0 = test_util::gaussian(n, 12, 0.5f);

  auto host_residual = r0;
  const auto host = test_util::encode(c, g, {.residual = host_residual});

  // The device pipeline on the host: residual += g, keys, stable sort, first k, ascending, put.
  auto residual = r0;
  gd::for_each_index(thrust::host, n, gd::AddKernel{g.data(), residual.data()});
  std::vector<std::uint32_t> keys(n), index(n);
  gd::for_each_index(thrust::host, n, gd::TopKKeyKernel{residual.data(), keys.data(), index.data()});
  std::stable_sort(index.begin(), index.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] > keys[b]; });
  index.resize(k);
  std::sort(index.begin(), index.end());
  std::vector<std::byte> dev(host.size());
  std::copy_n(host.begin(), header_bytes, dev.begin());
  gd::for_each_index(thrust::host, k, gd::TopKPutKernel{residual.data(), residual.data(), index.data(), dev.data() + header_bytes, k});
  CHECK(dev == host);
  CHECK(residual == host_residual);
}

#if !defined(GRADSYNC_WITH_NCCL)
TEST_CASE("Collectives 'nccl' and 'nccl-hierarchical' without NCCL say how to get them", "[cuda][nccl]") {
  try {
    gradsync::collective::AnyCollective::parse("nccl-hierarchical:2");
    FAIL("parse(\"nccl-hierarchical:2\") accepted in a build without NCCL");
  } catch (const gradsync::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("gradsync::nccl") && Catch::Contains("'hierarchical'"));
  }
  try {
    gradsync::collective::AnyCollective::parse("nccl");
    FAIL("parse(\"nccl\") accepted in a build without NCCL");
  } catch (const gradsync::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("gradsync::nccl") && Catch::Contains("'ring'"));
  }
}
#endif

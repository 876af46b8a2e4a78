// The host twins of the device codecs (include/gradsync/cuda/codec.cuh). The call goes through
// the very dispatch the device uses (cuda/detail/dispatch.hpp), and HostBackend runs every
// kernel's steps (the GRADSYNC_HD functions of cuda/detail/*.hpp) in the order a GPU runs them,
// doing the warp's and block's exchanges (max, OR, the team's fold, the shared fields, the scans) with
// plain loops. Every result must be the host codec's, bit for bit: bytes, residuals, values, and
// the WireError of a bad wire form.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

#include <gradsync/collective/any.hpp>
#include <gradsync/cuda/detail/dispatch.hpp>

#include "device_cases.hpp"

namespace gc = gradsync::codec;
namespace gd = gradsync::codec::detail;
namespace cd = gradsync::cuda::detail;
using cd::Op;
using device_cases::same_bits;

namespace {

/// Runs the kernels' steps on the host; faults land in its record, as in a WireStatus.
struct HostBackend {
  cd::Fault fault{};
  std::uint32_t calls = 0;

  cd::FaultSite site(const gc::WireHeader& expected, std::string_view name) {
    return cd::make_site(&fault, ++calls, expected, name);
  }
  /// WireStatus::check.
  void check() {
    if (fault.call == 0) return;
    const cd::Fault f = fault;
    fault = {};
    cd::raise(f);
  }

  // launch.cuh's admit (every block sees the same header; block 0 records) and write_header.
  bool admit(const cd::Frame& f) {
    if (!f.in || cd::header_matches(f.in, f.site.expected)) return true;
    if (fault.call == 0) {
      fault.call = f.site.call;
      cd::describe_header(fault, f.site, f.in);
    }
    return false;
  }
  static void write_header(const cd::Frame& f) {
    if (f.out) std::memcpy(f.out, &f.header, sizeof f.header);
  }

  template <class Format, Op op, bool Feedback>
  void narrow(const cd::Buffers& b, const cd::Frame& f) {
    using Items = cd::NarrowItems<Format, op, Feedback>;
    if (!admit(f)) return;  // the device loads first, but stores nothing either way
    write_header(f);
    for (std::size_t i = 0; i < Items::items(b.n); ++i) {
      typename Items::Loaded r;
      Items{b}.load(i, r);
      Items{b}.finish(i, r);
    }
  }

  template <unsigned Bits, Op op, bool Feedback>
  void qsgd(const cd::QsgdWarp<Bits, op, Feedback>& q, const cd::Frame& f) {
    using Q = cd::QsgdWarp<Bits, op, Feedback>;
    constexpr std::size_t group = Q::L::group;
    constexpr unsigned lanes = Q::lanes;
    if (!admit(f)) return;
    write_header(f);
    for (std::size_t bk = 0; bk < gd::bucket_count(q.b.n, q.bucket); ++bk) {  // one warp each
      const auto [begin, len] = gd::bucket_range(bk, q.bucket, q.b.n);
      const std::size_t groups = (len + group - 1) / group;
      if constexpr (!cd::encodes(op)) {
        const float step = q.step_in(bk);
        for (std::size_t g = 0; g < groups; ++g)
          for (unsigned lane = 0; lane < lanes; ++lane) q.decode(bk, begin, g, lane, step);
        continue;
      }
      const float step = op == Op::reduce ? q.step_in(bk) : 0.0f;
      using Quad = std::array<float, 4>;
      std::vector<Quad> kept(groups * lanes);  // the registers of a cached bucket: [g][lane]
      const auto gather = [&](std::size_t g, unsigned lane) {
        Quad x;
        q.gather(bk, begin, g, lane, step, x.data());
        return x;
      };
      float scale;
      if (q.l2) {
        float partial[gd::reduce_lanes];
        if (q.cached()) {
          std::vector<float> staged(groups * group);
          for (std::size_t g = 0; g < groups; ++g)
            for (unsigned lane = 0; lane < lanes; ++lane) {
              kept[g * lanes + lane] = gather(g, lane);
              std::copy_n(kept[g * lanes + lane].data(), 4, staged.data() + g * group + 4 * lane);
            }
          for (unsigned l = 0; l < gd::reduce_lanes; ++l) partial[l] = gd::lane_sum_squares(staged.data(), len, l);
        } else {
          const typename Q::At at{q, bk, begin, step};
          for (unsigned l = 0; l < gd::reduce_lanes; ++l) partial[l] = gd::lane_sum_squares(at, len, l);
        }
        scale = std::sqrt(gd::fold_lanes(partial));
      } else {
        std::uint32_t m = 0;  // the warp max of the lanes' maxima
        for (std::size_t g = 0; g < groups; ++g)
          for (unsigned lane = 0; lane < lanes; ++lane) {
            const Quad x = gather(g, lane);
            if (q.cached()) kept[g * lanes + lane] = x;
            m = std::max(m, Q::max_bits(x.data()));
          }
        scale = gd::bits_float(m);
      }
      q.store_scale(bk, scale);
      for (std::size_t g = 0; g < groups; ++g) {
        typename Q::Field fields[group];
        for (unsigned lane = 0; lane < lanes; ++lane) {
          const Quad x = q.cached() ? kept[g * lanes + lane] : gather(g, lane);
          q.quantize(begin, g, lane, x.data(), scale, fields);
        }
        for (unsigned lane = 0; lane < lanes; ++lane) q.store_words(bk, g, lane, fields);
      }
    }
  }

  template <Op op, bool Feedback>
  void onebit(const cd::OneBitTeam<op, Feedback>& t, const cd::Frame& f) {
    using T = cd::OneBitTeam<op, Feedback>;
    using Quad = std::array<float, 4>;
    constexpr unsigned lanes = T::lanes;
    if (!admit(f)) return;
    write_header(f);
    for (std::size_t bk = 0; bk < gd::bucket_count(t.b.n, t.bucket); ++bk) {  // one team each
      const auto [begin, len] = gd::bucket_range(bk, t.bucket, t.b.n);
      const std::size_t words = (len + 31) / 32;
      if constexpr (!cd::encodes(op)) {
        for (std::size_t w = 0; w < words; ++w)
          for (unsigned lane = 0; lane < lanes; ++lane) t.decode(bk, begin, w, lane);
        continue;
      }
      const auto gather = [&](std::size_t w, unsigned lane) {
        Quad x;
        t.gather(bk, begin, w, lane, x.data());
        return x;
      };
      std::vector<Quad> kept(words * lanes);  // [w][lane]
      typename T::Partial partial[lanes];
      for (unsigned lane = 0; lane < lanes; ++lane)
        for (std::size_t w = 0; w < words; ++w) {
          kept[w * lanes + lane] = gather(w, lane);
          partial[lane].take(w, kept[w * lanes + lane].data());
        }
      for (unsigned h = lanes / 2; h > 0; h /= 2) {  // the team's shuffles: lane t takes lane t ^ h's
        typename T::Partial before[lanes];
        std::copy_n(partial, lanes, before);
        for (unsigned lane = 0; lane < lanes; ++lane) partial[lane].absorb(before[lane ^ h]);
      }
      const gd::SignMeans m = partial[0].means(len, words);
      for (unsigned lane = 1; lane < lanes; ++lane) {  // every lane computes them; all must agree
        const gd::SignMeans mine = partial[lane].means(len, words);
        if (gd::float_bits(mine.plus) != gd::float_bits(m.plus) || gd::float_bits(mine.minus) != gd::float_bits(m.minus))
          FAIL("team lane " << lane << " of bucket " << bk << " folds to other means than lane 0");
      }
      t.store_entry(bk, 0, gd::float_bits(m.plus));
      t.store_entry(bk, 1, gd::float_bits(m.minus));
      for (std::size_t w = 0; w < words; ++w) {
        std::uint32_t bits = 0;  // the team's OR
        for (unsigned lane = 0; lane < lanes; ++lane) {
          if (!t.cached()) kept[w * lanes + lane] = gather(w, lane);
          bits |= T::sign_bits(kept[w * lanes + lane].data(), lane);
        }
        t.store_entry(bk, 2 + w, bits);
        for (unsigned lane = 0; lane < lanes; ++lane) t.finish(begin, w, lane, kept[w * lanes + lane].data(), m);
      }
    }
  }

  /// topk.cuh's choose kernel: 32 lanes, each over its bins, the highest that finds it wins.
  static void choose(const std::uint32_t* hist, cd::TopKSelect& sel, unsigned pass, std::size_t k) {
    std::size_t before = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
      unsigned hi, lo;
      cd::TopKSelect::lane_bins(pass, lane, hi, lo);
      std::size_t mine = 0;
      for (unsigned d = lo; d <= hi; ++d) mine += hist[d];
      std::size_t above = sel.above + before;
      const long d = gd::first_digit(hist, hi, lo, k, above);
      if (d >= 0) {
        sel.choose(pass, static_cast<unsigned>(d), above);
        return;
      }
      before += mine;
    }
    FAIL("no lane found the digit (lane 31 always does: bin 0)");
  }

  template <Op op>
  void topk(const cd::Buffers& b, std::size_t k, const cd::Frame& f) {
    if constexpr (cd::decodes(op)) {  // validate, [fill,] scatter
      if (!admit(f)) return;
      const gd::TopKIndexBad bad{b.wire_in, b.n};
      for (std::size_t j = 0; j < k; ++j)
        if (bad(j)) {  // the lowest bad position
          if (fault.call == 0) {
            fault.call = f.site.call;
            cd::describe_index(fault, f.site, static_cast<std::uint32_t>(j), gd::load<std::uint32_t>(b.wire_in + 4 * j));
          }
          return;
        }
      if (op == Op::decode) std::fill_n(b.acc, b.n, 0.0f);
      for (std::size_t j = 0; j < k; ++j) gd::TopKScatterKernel{b.wire_in, b.acc, k}(j);
    }
    if constexpr (cd::encodes(op)) {
      write_header({.out = f.out, .header = f.header});
      if (b.n == 0) return;
      const cd::TopKPrepare p = cd::topk_prepare(op, b);
      const cd::TopKTiles t = cd::topk_tiles(op, b, p, k);
      cd::TopKSelect sel{};
      for (unsigned pass = 0; pass < gd::topk_passes; ++pass) {
        std::vector<std::uint32_t> hist(cd::topk_bins);
        for (std::size_t i = 0; i < b.n; i += 4) {
          float x[4];
          if (pass == 0) p(i, x);
          else cd::load_quad(t.v, i, b.n, b.vector, x);
          for (std::size_t c = 0; c < 4 && i + c < b.n; ++c) {
            const long bin = sel.bin(gd::magnitude_bits(x[c]), pass);
            if (bin >= 0) ++hist[static_cast<std::size_t>(bin)];
          }
        }
        choose(hist.data(), sel, pass, k);
      }
      const std::size_t tiles = cd::TopKTiles::tiles(b.n);
      std::vector<unsigned long long> offsets(tiles);  // the exclusive scan of the tiles' counts
      for (std::size_t tile = 0; tile + 1 < tiles; ++tile)
        for (unsigned th = 0; th < cd::topk_threads; ++th) offsets[tile + 1] += t.count(tile, th, sel.prefix);
      std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
      for (std::size_t tile = 0; tile < tiles; ++tile) {
        unsigned long long before = offsets[tile];  // + the block's exclusive scan
        for (unsigned th = 0; th < cd::topk_threads; ++th) {
          const unsigned long long mine = t.count(tile, th, sel.prefix);
          t.place(tile, th, sel.prefix, k - sel.above, before);
          before += mine;
        }
      }
    }
  }
};

/// 16-byte aligned host storage for n values, optionally `skew` elements past alignment (the
/// device's element-by-element paths).
template <class T>
struct Buffer {
  std::vector<T> storage;
  T* p;
  std::size_t n;
  Buffer(std::span<const T> v, std::size_t skew) : storage(v.size() + 32 / sizeof(T) + skew), n(v.size()) {
    auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
    p = reinterpret_cast<T*>((addr + 15) / 16 * 16) + skew;
    std::copy(v.begin(), v.end(), p);
  }
  std::span<T> span() { return {p, n}; }
  std::vector<T> host() const { return {p, p + n}; }
};

struct Layout {  // how the buffers sit
  std::size_t floats, wire;  // elements past 16-byte alignment
  const char* name;
};
constexpr Layout layouts[] = {{0, 0, "aligned"}, {1, 0, "floats off by 4 bytes"}, {0, 4, "wire off by 4 bytes"}};

template <Op op>
std::size_t twin(const gc::AnyCodec& c, const cd::Call& call) {
  HostBackend be;
  const std::size_t bytes = cd::run<op>(c, call, be);
  be.check();
  return bytes;
}

}  // namespace

TEST_CASE("The device kernels' steps give the host codecs' bytes, residuals and values", "[cuda][twin]") {
  for (const char* name : device_cases::codecs)
    for (const std::size_t n : device_cases::sizes)
      for (const Layout& layout : layouts) {
        CAPTURE(name, n, layout.name);
        const auto c = gc::AnyCodec::parse(name);
        const device_cases::Expected want(c, n);

        Buffer<float> in(want.v, layout.floats), residual(want.r0, layout.floats);
        Buffer<std::byte> wire(std::vector<std::byte>(c.encoded_bytes(n)), layout.wire);
        auto ctx = want.ctx;
        ctx.residual = residual.span();
        REQUIRE(twin<Op::encode>(c, {.in = in.span(), .wire_out = wire.span(), .ctx = &ctx}) == want.wire.size());
        CHECK(wire.host() == want.wire);
        CHECK(same_bits(residual.host(), want.residual));

        Buffer<std::byte> received(want.wire, layout.wire);
        Buffer<float> out(want.base, layout.floats), sum(want.base, layout.floats);
        twin<Op::decode>(c, {.acc = out.span(), .wire_in = received.span()});
        twin<Op::decode_add>(c, {.acc = sum.span(), .wire_in = received.span()});
        CHECK(same_bits(out.host(), want.decoded));
        CHECK(same_bits(sum.host(), want.summed));

        for (int m = 0; m < 2; ++m) {
          CAPTURE(want.means[m]);
          Buffer<float> acc(want.base, layout.floats), e(want.r0, layout.floats);
          Buffer<std::byte> sent(std::vector<std::byte>(c.encoded_bytes(n)), layout.wire);
          ctx.residual = e.span();
          const std::size_t bytes = twin<Op::reduce>(
              c, {.acc = acc.span(), .wire_in = received.span(), .wire_out = sent.span(), .ctx = &ctx, .divisor = float(want.means[m])});
          REQUIRE(bytes == want.steps[m].wire.size());
          CHECK(sent.host() == want.steps[m].wire);
          CHECK(same_bits(acc.host(), want.steps[m].acc));
          CHECK(same_bits(e.host(), want.steps[m].residual));
        }
      }
}

TEST_CASE("Top-k's device selection matches the host's on ties, zeros and equal values", "[cuda][twin]") {
  const std::size_t n = 20'011;
  std::vector<std::vector<float>> cases{std::vector<float>(n, 0.0f), std::vector<float>(n, 1.5f),
                                        std::vector<float>(n, -0.0f)};
  cases.emplace_back(n);
  for (std::size_t i = 0; i < n; ++i) cases.back()[i] = i % 3 == 0 ? -1.0f : i % 3 == 1 ? 1.0f : 0.5f;
  for (const float ratio : {0.001f, 0.01f, 0.5f, 1.0f})
    for (const auto& v : cases) {
      CAPTURE(ratio, v[0], v[1]);
      const gc::AnyCodec c = gc::TopK{.ratio = ratio};
      const auto host = test_util::encode(c, v);
      std::vector<std::byte> wire(c.encoded_bytes(n));
      const gc::EncodeContext ctx{};
      twin<Op::encode>(c, {.in = v, .wire_out = wire, .ctx = &ctx});
      CHECK(wire == host);
    }
}

TEST_CASE("A bad device wire form throws the host decoder's WireError, output untouched, and later decodes still run",
          "[cuda][twin]") {
  const std::size_t n = 5000;
  const auto v = device_cases::inputs(n, 3);
  for (const char* name : device_cases::codecs) {
    CAPTURE(name);
    const auto c = gc::AnyCodec::parse(name);
    const auto wire = device_cases::wire_of(c, v);
    for (std::size_t byte = 0; byte < gc::header_bytes; ++byte) {  // every header field
      CAPTURE(byte);
      auto bad = wire;
      bad[byte] ^= std::byte{0x41};
      const std::string host_error = device_cases::host_error(c, bad, n);
      REQUIRE(!host_error.empty());
      auto acc = std::vector<float>(n, 2.0f), residual = std::vector<float>(n, 3.0f);
      std::vector<std::byte> out(c.encoded_bytes(n), std::byte{0x5a});
      const gc::EncodeContext ctx{.residual = residual};
      CHECK_THROWS_WITH(twin<Op::decode_add>(c, {.acc = acc, .wire_in = bad}), host_error);
      CHECK_THROWS_WITH(twin<Op::reduce>(c, {.acc = acc, .wire_in = bad, .wire_out = out, .ctx = &ctx}), host_error);
      CHECK(acc == std::vector<float>(n, 2.0f));
      CHECK(residual == std::vector<float>(n, 3.0f));
      CHECK(out == std::vector<std::byte>(c.encoded_bytes(n), std::byte{0x5a}));
    }
    // sizes alone: caught on the host before any kernel
    auto acc = std::vector<float>(n);
    const std::vector<std::byte> truncated(wire.begin(), wire.end() - 1);
    CHECK_THROWS_AS(twin<Op::decode>(c, {.acc = acc, .wire_in = truncated}), gradsync::WireError);
    CHECK_THROWS_AS(twin<Op::decode>(c, {.acc = acc, .wire_in = std::span(wire).first(15)}), gradsync::WireError);
    // One status over several decodes: the first fault is reported, good decodes still run.
    auto wrong_codec = wire, wrong_elements = wire;
    wrong_codec[3] ^= std::byte{0x41};
    wrong_elements[4] ^= std::byte{1};
    std::fill(acc.begin(), acc.end(), 0.0f);
    HostBackend be;
    const std::vector<std::byte>* calls[] = {&wrong_codec, &wrong_elements, &wire};
    for (const auto* w : calls) cd::run<Op::decode_add>(c, {.acc = acc, .wire_in = *w}, be);
    CHECK_THROWS_WITH(be.check(), device_cases::host_error(c, wrong_codec, n));
    CHECK_NOTHROW(be.check());
    // 0 + decode, not decode: +0.0f + -0.0f is +0.0f, and QSGD decodes a negative level 0 as -0.0f
    std::vector<float> sum(n, 0.0f);
    c.decode_add(wire, sum);
    CHECK(same_bits(acc, sum));
  }
  // a top-k index out of order: the host's message, nothing touched
  const gc::AnyCodec c = gc::TopK{.ratio = 0.01f};
  auto wire = test_util::encode(c, v);
  gd::store(wire.data() + gc::header_bytes + 8, std::uint32_t{0});  // the third index not ascending
  const std::string host_error = device_cases::host_error(c, wire, n);
  REQUIRE_THAT(host_error, Catch::Contains("position 2"));
  auto acc = std::vector<float>(n, 2.0f);
  std::vector<std::byte> out(c.encoded_bytes(n));
  const gc::EncodeContext ctx{};
  CHECK_THROWS_WITH(twin<Op::decode>(c, {.acc = acc, .wire_in = wire}), host_error);
  CHECK_THROWS_WITH(twin<Op::reduce>(c, {.acc = acc, .wire_in = wire, .wire_out = out, .ctx = &ctx}), host_error);
  CHECK(acc == std::vector<float>(n, 2.0f));
}

TEST_CASE("Device calls refuse misaligned wire buffers and wrong residuals", "[cuda][twin]") {
  const std::size_t n = 1000;
  const auto v = device_cases::inputs(n, 5);
  std::vector<std::byte> wire(gc::AnyCodec::parse("ef+qsgd4").encoded_bytes(n) + 1);
  std::vector<float> residual(n - 1);
  const gc::EncodeContext plain{}, short_residual{.residual = residual};
  CHECK_THROWS_AS(twin<Op::encode>(gc::AnyCodec::parse("qsgd4"), {.in = v, .wire_out = std::span(wire).subspan(1), .ctx = &plain}),
                  gradsync::UsageError);
  CHECK_THROWS_WITH(twin<Op::encode>(gc::AnyCodec::parse("ef+qsgd4"), {.in = v, .wire_out = wire, .ctx = &short_residual}),
                    Catch::Contains("residual has 999 elements"));
  CHECK_THROWS_WITH(twin<Op::encode>(gc::AnyCodec::parse("onebit"), {.in = v, .wire_out = wire, .ctx = &short_residual}),
                    Catch::Contains("residual has 999 elements"));
}

TEST_CASE("The 2-norm lanes are the host's order", "[cuda][twin]") {
  for (std::size_t len : {1u, 15u, 16u, 17u, 511u, 512u}) {
    const auto v = test_util::gaussian(len, unsigned(len));
    float lanes[gd::reduce_lanes];
    for (std::size_t l = 0; l < gd::reduce_lanes; ++l) lanes[l] = gd::lane_sum_squares(v.data(), len, l);
    CHECK(gd::float_bits(gd::fold_lanes(lanes)) == gd::float_bits(gd::sum_squares(v.data(), len)));
  }
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

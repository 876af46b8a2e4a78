#pragma once
/// From a codec call to its kernels, the same for the device (cuda/codec.cuh's DeviceBackend
/// launches them) and for the host twin (tests/cuda/test_host_twins.cpp runs their steps): the
/// checks the host can make from sizes alone, the headers, the residual each encode updates,
/// the buffers of the pass, and which kernel serves which codec.
///
/// A Backend provides: FaultSite site(expected, name); narrow<Format, op, Feedback>(Buffers,
/// Frame); qsgd(QsgdWarp, Frame); onebit(OneBitTeam, Frame); topk<op>(Buffers, k, Frame).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <variant>

#include "../../codec/any.hpp"
#include "../../core/error.hpp"
#include "narrow_items.hpp"
#include "onebit_team.hpp"
#include "qsgd_warp.hpp"
#include "topk_tiles.hpp"
#include "wire_fault.hpp"

namespace gradsync::cuda::detail {
namespace gc = gradsync::codec;

/// One call's spans (device memory on a GPU) and options; which are used depends on the Op.
struct Call {
  std::span<const float> in{};
  std::span<float> acc{};
  std::span<const std::byte> wire_in{};
  std::span<std::byte> wire_out{};
  const gc::EncodeContext* ctx = nullptr;
  float divisor = 1.0f;
};

/// The element format of fp32 / fp16 / bf16, and the bit width of QSGD.
template <class C>
struct NarrowFormat {
  using type = typename C::format;
};
template <>
struct NarrowFormat<gc::Identity> {
  using type = Fp32Format;
};
template <class C>
struct QsgdBits {};
template <unsigned Bits>
struct QsgdBits<gc::Qsgd<Bits>> : std::integral_constant<unsigned, Bits> {};

/// The header codec c writes for n elements (and a decoder of n elements expects).
template <class C>
gc::WireHeader header_for(const C& c, std::size_t n) {
  const auto elements = static_cast<std::uint32_t>(n);
  if constexpr (std::same_as<C, gc::Identity>)
    return {.codec = C::id, .elements = elements, .payload_bytes = static_cast<std::uint32_t>(n * sizeof(float))};
  else
    return {.codec = C::id, .elements = elements, .bucket = c.wire_bucket(n),
            .payload_bytes = static_cast<std::uint32_t>(c.payload_bytes(n))};
}

inline void check_aligned(const void* wire, const std::string& name) {
  if (reinterpret_cast<std::uintptr_t>(wire) % 4 != 0)
    throw UsageError("gradsync: device " + name + " wire buffers must be 4-byte aligned (cudaMalloc gives 256); "
                     "copy the message to an aligned buffer");
}

/// What the host can see of a received wire form without reading it: its size.
inline void check_wire_size(const std::string& name, std::size_t bytes, const gc::WireHeader& expected) {
  if (bytes < gc::header_bytes)
    throw WireError("gradsync: " + name + " payload rejected: truncated (" + std::to_string(bytes) +
                    " bytes, the header alone is 16)");
  if (bytes - gc::header_bytes != expected.payload_bytes)
    throw WireError("gradsync: " + name + " payload rejected: " + std::to_string(bytes - gc::header_bytes) +
                    " payload bytes arrived, " + std::to_string(expected.elements) + " elements need exactly " +
                    std::to_string(expected.payload_bytes) + " (truncated or oversized)");
}

/// The kernels of one concrete codec for one call; returns the wire size written (encodes).
template <Op op, bool Feedback, class C, class Backend>
std::size_t run_codec(const C& c, const Call& call, std::span<float> residual, Backend& be) {
  const std::size_t n = op == Op::encode ? call.in.size() : call.acc.size();
  const std::string name(c.name());
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("gradsync: " + name + " encodes at most 2^32-1 elements per unit; slice the layer");
  Frame frame;
  std::size_t bytes = 0;
  if constexpr (encodes(op)) {
    if constexpr (std::same_as<C, gc::Identity>) {
      bytes = c.encoded_bytes(n);
      if (call.wire_out.size() < bytes) throw UsageError("gradsync: fp32 encode needs an output of encoded_bytes(n) bytes");
      frame.header = header_for(c, n);
    } else {
      const gc::detail::EncodePlan plan = gc::detail::plan_encode(c, n, call.wire_out.size(), residual.size());
      bytes = plan.bytes;
      frame.header = plan.header;
    }
    check_aligned(call.wire_out.data(), name);
    frame.out = call.wire_out.data();
  }
  if constexpr (decodes(op)) {
    const gc::WireHeader expected = header_for(c, n);
    check_wire_size(name, call.wire_in.size(), expected);
    check_aligned(call.wire_in.data(), name);
    frame.in = call.wire_in.data();
    frame.site = be.site(expected, name);
  }
  Buffers b;
  b.n = n;
  b.divisor = call.divisor;
  b.vector = true;
  const auto use = [&b](const float* p) { b.vector = b.vector && aligned16(p); };
  if constexpr (op == Op::encode) use(b.in = call.in.data());
  if constexpr (decodes(op)) {
    use(b.acc = call.acc.data());
    b.wire_in = call.wire_in.data() + gc::header_bytes;
  }
  if constexpr (Feedback) use(b.residual = residual.data());
  if constexpr (encodes(op)) b.wire_out = call.wire_out.data() + gc::header_bytes;

  if constexpr (std::same_as<C, gc::Identity> || requires { typename C::format; }) {
    if (b.wire_in) b.vector = b.vector && aligned16(b.wire_in);  // both sides move 16 bytes at a time
    if (b.wire_out) b.vector = b.vector && aligned16(b.wire_out);
    be.template narrow<typename NarrowFormat<C>::type, op, Feedback>(b, frame);
  } else if constexpr (requires { QsgdBits<C>::value; }) {
    const std::uint64_t key = encodes(op) ? gc::detail::stream_key(*call.ctx) : 0;
    be.qsgd(QsgdWarp<QsgdBits<C>::value, op, Feedback>{b, c.bucket, c.norm == gc::QsgdNorm::l2, key}, frame);
  } else if constexpr (std::same_as<C, gc::OneBit>) {
    be.onebit(OneBitTeam<op, Feedback>{b, c.bucket}, frame);
  } else {
    static_assert(std::same_as<C, gc::TopK>, "gradsync: no device kernels for this codec");
    be.template topk<op>(b, c.kept(n), frame);
  }
  return bytes;
}

/// Unwraps AnyCodec and ErrorFeedback, and picks the residual an encode updates: ErrorFeedback's
/// (checked as its host encode does), OneBit's and TopK's own; the others have none.
template <Op op, class C, class Backend>
std::size_t run(const C& c, const Call& call, Backend& be) {
  if constexpr (std::same_as<C, gc::AnyCodec>) {
    return std::visit([&](const auto& concrete) { return run<op>(concrete, call, be); }, c.variant());
  } else if constexpr (requires { c.inner; }) {
    if constexpr (encodes(op)) {
      const std::span<float> e = call.ctx->residual;
      const std::size_t n = op == Op::encode ? call.in.size() : call.acc.size();
      if (!e.empty() && e.size() != n)
        throw UsageError("gradsync: " + std::string(c.name()) + " residual has " + std::to_string(e.size()) +
                         " elements, the unit " + std::to_string(n) + "; keep one residual per unit");
      if (!e.empty()) return run_codec<op, true>(c.inner, call, e, be);
    }
    return run_codec<op, false>(c.inner, call, {}, be);
  } else if constexpr (encodes(op) && C{}.traits().needs_residual) {
    if (!call.ctx->residual.empty()) return run_codec<op, true>(c, call, call.ctx->residual, be);
    return run_codec<op, false>(c, call, {}, be);
  } else {
    return run_codec<op, false>(c, call, {}, be);
  }
}

}  // namespace gradsync::cuda::detail

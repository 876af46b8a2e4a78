#pragma once
/// Where units live. The library reads and writes a unit on the host, except through its codec. A
/// codec that also takes units in device memory (a DeviceCodec: codec::OnDevice, cuda::OnDevice)
/// says which memory it holds and does, for that memory, the three steps the library would
/// otherwise do on the host: the mean's division, the NaN check, and the codec of units that go as
/// fp32 (codec/bypass.hpp). The functions here call the codec for its memory and do the host step
/// for any other; the functors are the bodies both run (host twins and CUDA, through Thrust).
///
/// \code
///   gradsync::codec::divide(codec, piece, ranks);                 // piece /= ranks, wherever it lives
///   if (auto bad = gradsync::codec::first_non_finite(codec, grad)) // bad->index, bad->value
///     ...;
///   collective.run(t, gradsync::codec::fp32_of(codec), job, ws);  // a unit of small tensors
/// \endcode
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "concept.hpp"
#include "detail/kernel.hpp"
#include "identity.hpp"

namespace gradsync::codec {

/// A NaN or Inf in a unit: where, and what.
struct NonFinite {
  std::size_t index;
  float value;
};

// clang-format off
/// A codec that also takes units in device memory: for memory where device_memory(p) holds,
/// encode reads and decode/decode_add write device memory (the wire stays in host memory), and
/// divide, first_non_finite and fp32 stand in for the host steps. Any other memory it treats as
/// the host codec would.
template <class C>
concept DeviceCodec = Codec<C> &&
  requires(const C c, const void* p, std::span<float> data, std::span<const float> in, int ranks) {
    { c.device_memory(p) } -> std::convertible_to<bool>;              // p is memory of this codec's device
    { c.divide(data, ranks) };                                         // data[i] /= ranks
    { c.first_non_finite(in) } -> std::same_as<std::optional<NonFinite>>;
    { c.fp32() } -> Codec;                                             // fp32 on the wire, same memory
  };
// clang-format on

namespace detail {
/// data[i] /= ranks: the mean from the sum.
struct DivideKernel {
  float* data;
  float ranks;
  GRADSYNC_HD void operator()(std::size_t i) const { data[i] /= ranks; }
};
/// Whether data[i] is NaN or Inf (exponent all ones).
struct NonFiniteAt {
  const float* data;
  GRADSYNC_HD bool operator()(std::size_t i) const { return (float_bits(data[i]) & 0x7f800000u) == 0x7f800000u; }
};
}  // namespace detail

/// Whether `p` points into memory that codec `c` keeps on a device (never for host codecs).
template <Codec C>
bool device_memory(const C& c, const void* p) {
  if constexpr (DeviceCodec<C>) return c.device_memory(p);
  else return false;
}

/// data /= ranks, where `c` keeps it.
template <Codec C>
void divide(const C& c, std::span<float> data, int ranks) {
  if constexpr (DeviceCodec<C>)
    if (c.device_memory(data.data())) return c.divide(data, ranks);
  detail::for_each_index(thrust::host, data.size(), detail::DivideKernel{data.data(), static_cast<float>(ranks)});
}

/// The first NaN or Inf of `data`, where `c` keeps it; nothing when every value is finite.
template <Codec C>
std::optional<NonFinite> first_non_finite(const C& c, std::span<const float> data) {
  if constexpr (DeviceCodec<C>)
    if (c.device_memory(data.data())) return c.first_non_finite(data);
  // The largest magnitude's bits: NaN and Inf, exponent all ones, are the only values >= 0x7f800000.
  // An unsigned max vectorizes (GCC 12 left an OR of comparisons scalar: 6% of a rank's CPU under
  // P3); the search runs only on failure.
  std::uint32_t top = 0;
  for (const float x : data) top = std::max(top, detail::float_bits(x) & 0x7fffffffu);
  if (top < 0x7f800000u) return std::nullopt;
  const detail::NonFiniteAt bad{data.data()};
  std::size_t i = 0;
  while (!bad(i)) ++i;
  return NonFinite{i, data[i]};
}

/// The codec of units that travel as fp32: codec::Identity, or for a DeviceCodec its fp32() (the
/// same memory handling).
template <Codec C>
auto fp32_of(const C& c) {
  if constexpr (DeviceCodec<C>) return c.fp32();
  else return Identity{};
}

}  // namespace gradsync::codec

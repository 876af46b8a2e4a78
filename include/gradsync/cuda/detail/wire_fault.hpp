#pragma once
/// How a device decode reports a bad wire form without a host round trip: every block compares
/// the 16-byte header with the one it expects (the expected header fixes all 16 bytes) and, on a
/// mismatch, returns before touching anything; block 0 records the fault (the first since the
/// last check wins) with what the host decoder's message needs. WireStatus::check() turns the
/// record into the very WireError the host codec throws for the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "../../codec/detail/topk_select.hpp"
#include "../../codec/wire.hpp"

namespace gradsync::cuda::detail {

enum class FaultKind : std::uint32_t {
  none = 0,
  header = 1,       ///< the header differs from the expected one
  topk_index = 2,   ///< a top-k index out of range or not ascending
};

/// The record of one fault (device memory, zero when there is none).
struct Fault {
  std::uint32_t call;     ///< the faulty decode's number (0: no fault)
  FaultKind kind;
  codec::WireHeader got;  ///< header: the header as it arrived
  codec::WireHeader expected;
  std::uint32_t position, index;  ///< topk_index: the bad entry and the index it holds
  char codec_name[12];                 ///< the decoder's name, as the host's message gives it
};

/// What a decoding kernel checks and where it records (a kernel argument).
struct FaultSite {
  Fault* fault = nullptr;
  std::uint32_t call = 0;
  codec::WireHeader expected{};
  char codec_name[12] = {};
};

/// The frame of a codec kernel (a kernel argument): the received wire form whose header every
/// block checks, and the sent wire form whose header block 0 writes (null when not used).
struct Frame {
  const std::byte* in = nullptr;
  FaultSite site{};
  std::byte* out = nullptr;
  codec::WireHeader header{};
};

inline FaultSite make_site(Fault* fault, std::uint32_t call, const codec::WireHeader& expected, std::string_view name) {
  FaultSite s{fault, call, expected, {}};
  std::memcpy(s.codec_name, name.data(), name.size() < sizeof s.codec_name - 1 ? name.size() : sizeof s.codec_name - 1);
  return s;
}

/// The header at `wire` (4-byte aligned) is exactly `expected`.
GRADSYNC_HD inline bool header_matches(const std::byte* wire, const codec::WireHeader& expected) {
  std::uint32_t want[4];
  memcpy(want, &expected, sizeof want);
  bool same = true;
  for (int i = 0; i < 4; ++i) same &= codec::detail::load<std::uint32_t>(wire + 4 * i) == want[i];
  return same;
}

/// Fills `f` (already claimed for site.call) for a header fault / a top-k index fault.
GRADSYNC_HD inline void describe_header(Fault& f, const FaultSite& site, const std::byte* wire) {
  f.kind = FaultKind::header;
  memcpy(&f.got, wire, sizeof f.got);
  f.expected = site.expected;
  memcpy(f.codec_name, site.codec_name, sizeof f.codec_name);
}
GRADSYNC_HD inline void describe_index(Fault& f, const FaultSite& site, std::uint32_t position, std::uint32_t index) {
  f.kind = FaultKind::topk_index;
  f.expected = site.expected;
  f.position = position;
  f.index = index;
  memcpy(f.codec_name, site.codec_name, sizeof f.codec_name);
}

/// Throws the host decoder's WireError for the fault `f` records.
[[noreturn]] inline void raise(const Fault& f) {
  const std::string name(f.codec_name, strnlen(f.codec_name, sizeof f.codec_name));
  if (f.kind == FaultKind::topk_index) throw codec::detail::topk_index_error(f.index, f.position, f.expected.elements);
  // The wire's size matched the expected payload (checked before the launch), so one of the
  // fields check_header compares differs, and it throws.
  const codec::WireHeader& e = f.expected;
  codec::check_header(f.got, codec::header_bytes + e.payload_bytes, e.codec, e.elements, name.c_str(), e.bucket);
  throw WireError("gradsync: " + name + " payload rejected: its header differs from the expected one");
}

}  // namespace gradsync::cuda::detail

#pragma once
/// Statistics a Synchronizer keeps, and the per-unit event it can report (for timelines).
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace gradsync {

struct Statistics {
  std::uint64_t units = 0;         ///< units aggregated
  std::uint64_t bytes_sent = 0;    ///< encoded bytes this rank put on the wire
  std::uint64_t iterations = 0;    ///< finish_iteration calls
  double queued_seconds = 0;       ///< summed over units: ready -> its collective started
  double wire_seconds = 0;         ///< summed over units: collective started -> finished
  double exposed_wait_seconds = 0; ///< time the caller spent blocked in wait_for / wait_all
  std::uint64_t elements = 0;             ///< elements aggregated, summed over units
  /// Of those, the ones a lossy codec compressed (the rest went as fp32: a lossless codec, or
  /// tensors under the codec's bypass threshold, codec/bypass.hpp).
  std::uint64_t elements_compressed = 0;
  std::uint64_t bytes_compressed = 0;     ///< of bytes_sent, those of compressed units

  double compressed_share() const { return elements ? double(elements_compressed) / double(elements) : 0.0; }
  double compressed_bytes_share() const { return bytes_sent ? double(bytes_compressed) / double(bytes_sent) : 0.0; }
};

/// One unit's life, reported to Options::on_unit when set (e.g. for a Chrome trace).
struct UnitEvent {
  using clock = std::chrono::steady_clock;
  std::uint32_t unit = 0;
  std::int64_t iteration = 0;
  std::size_t elements = 0;
  std::size_t bytes_sent = 0;
  clock::time_point ready, started, finished;
};

}  // namespace gradsync

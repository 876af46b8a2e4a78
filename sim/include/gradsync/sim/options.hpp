#pragma once
/// sim::Options: how long simulate() (simulator.hpp) runs, the credit window it models (the
/// Synchronizer's defaults unless set), what it records and the rank-skew draws.
#include <cstddef>
#include <cstdint>

#include <gradsync/core/options.hpp>

namespace gradsync::sim {

struct Options {
  std::size_t iterations = 10;
  /// Units whose collectives may be in flight at once (gradsync::Options::inflight_units); 0: the
  /// library's choice for the network's ranks (gradsync::default_inflight_units).
  std::size_t inflight_units = 0;
  /// fp32 bytes of units in flight at once (gradsync::Options::credit_bytes).
  std::size_t credit_bytes = gradsync::Options{}.credit_bytes;
  /// Keep the per-unit, per-transfer and compute events (off: only times and utilization).
  bool record = true;
  /// Draw each rank's pace per iteration from the profile's measured iteration_seconds (rank skew,
  /// simulator.hpp); off, or a profile without them: every rank runs the layers' times every
  /// iteration.
  bool rank_skew = true;
  std::uint64_t seed = 1;  ///< of the rank-skew draws: equal seeds, equal runs
};

}  // namespace gradsync::sim

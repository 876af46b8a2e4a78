#pragma once
/// Options: the Synchronizer's runtime knobs (policies carry their own knobs).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "statistics.hpp"

namespace gradsync {

struct Options {
  /// true: every rank gets the mean of all ranks' gradients; false: the sum.
  bool average = true;
  /// Bytes (fp32) of units that may be on the wire at once. A more urgent unit that becomes ready
  /// overtakes everything still queued at the next unit boundary. A unit larger than the credit
  /// still goes, alone.
  std::size_t credit_bytes = 4u << 20;
  /// Units whose collectives may progress concurrently (one executor thread each).
  unsigned inflight_units = 2;
  /// Seed for stochastic codecs (QSGD rounding); all ranks must use the same one.
  std::uint64_t seed = 0;
  /// How long to wait for a peer (or for a layer's aggregate) before failing with PeerError.
  std::chrono::milliseconds timeout{30'000};
  /// Fail on a gradient holding NaN or Inf, naming the layer and element, before any of it is sent:
  /// each unit is checked as its collective starts (where it is read anyway), and every rank stops
  /// (this one with UsageError, its peers with PeerError naming it) at its next call or wait.
  /// Turn off when a loss scaler deliberately lets overflowed steps through and skips them.
  bool check_finite = true;
  /// Called from an executor thread after each unit (keep it cheap); empty: nothing.
  std::function<void(const UnitEvent&)> on_unit;
};

}  // namespace gradsync

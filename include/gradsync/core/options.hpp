#pragma once
/// Options: the Synchronizer's runtime knobs (policies carry their own knobs).
#include <algorithm>
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
  /// Units whose collectives may progress concurrently (one executor thread each); 0: the
  /// library's choice for the job's number of ranks, default_inflight_units().
  unsigned inflight_units = 0;
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

/// Options::inflight_units when it is 0, for `ranks` ranks: two units per hop of a ring unit,
/// 2 (N-1), at least 4 and at most 8. A ring unit is 2 (N-1) steps, each waiting for a
/// neighbour's message, so a fixed number in flight leaves each link fewer messages at once the
/// more ranks there are: on 4 ranks sharing 2 cores P3's slices of VGG-11 took 1.91-1.92 s per
/// iteration with 2 in flight and 1.53-1.71 s with 4 to 8, on less CPU
/// (benchmarks/e2e/results/2026-11-29-inflight). On 2 ranks 4 were 14% faster than 2 on the
/// fast links of an Intel Xeon (VGG-11: 0.513 s against 0.597 in the same rounds; the same at 1
/// Gbit/s and 300 Mbit/s), where an AMD EPYC had measured them within the rounds' spread
/// (benchmarks/e2e/results/2026-11-30-window-n2): each MPI poll then finds more messages done. Beyond
/// 4 ranks the cap is not measured: each unit in flight is an executor thread with buffers of the
/// largest unit.
inline unsigned default_inflight_units(int ranks) { return static_cast<unsigned>(std::clamp(2 * (ranks - 1), 4, 8)); }

/// `o` with what it leaves to the library chosen for `ranks` ranks (inflight_units 0), as the
/// Synchronizer runs it (schedule/plan.hpp).
inline Options settled(Options o, int ranks) {
  if (o.inflight_units == 0) o.inflight_units = default_inflight_units(ranks);
  return o;
}

}  // namespace gradsync

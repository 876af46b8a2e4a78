#pragma once
/// Statistics a Synchronizer keeps, and the per-unit event it can report (for timelines).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gradsync {

/// A count a policy keeps of its own work (a collective's, collective::Runtime::counters), by
/// name: the Synchronizer reports them without knowing what they count.
struct Counter {
  std::string_view name;  ///< static text, e.g. "blocks important"
  std::uint64_t value = 0;
};

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
  std::vector<Counter> counters;          ///< the policies' own counts, summed over units (collective::Runtime)

  /// Adds another synchronizer's counters (one run that replaced its Synchronizer, e.g. retuned).
  Statistics& operator+=(const Statistics& o) {
    units += o.units;
    bytes_sent += o.bytes_sent;
    iterations += o.iterations;
    queued_seconds += o.queued_seconds;
    wire_seconds += o.wire_seconds;
    exposed_wait_seconds += o.exposed_wait_seconds;
    elements += o.elements;
    elements_compressed += o.elements_compressed;
    bytes_compressed += o.bytes_compressed;
    for (const Counter& c : o.counters) {
      auto same = std::ranges::find(counters, c.name, &Counter::name);
      if (same == counters.end()) counters.push_back(c);
      else same->value += c.value;
    }
    return *this;
  }

  /// The policies' count named `name`; 0 when none keeps it.
  std::uint64_t counter(std::string_view name) const {
    const auto c = std::ranges::find(counters, name, &Counter::name);
    return c == counters.end() ? 0 : c->value;
  }

  double compressed_share() const { return elements ? double(elements_compressed) / double(elements) : 0.0; }
  double compressed_bytes_share() const { return bytes_sent ? double(bytes_compressed) / double(bytes_sent) : 0.0; }
};

/// The counters behind Statistics, updated by the Synchronizer's threads without locks.
class StatisticsRecorder {
 public:
  using clock = std::chrono::steady_clock;
  /// A unit of `elements` finished: `sent` bytes, `compressed` by a lossy codec, `queued` from
  /// ready to started, `wire` from started to finished.
  void unit(std::size_t elements, std::size_t sent, bool compressed, clock::duration queued, clock::duration wire) {
    units_.fetch_add(1);
    bytes_sent_.fetch_add(sent);
    elements_.fetch_add(elements);
    if (compressed) {
      elements_compressed_.fetch_add(elements);
      bytes_compressed_.fetch_add(sent);
    }
    add(queued_ns_, queued);
    add(wire_ns_, wire);
  }
  void iteration() { iterations_.fetch_add(1); }
  void exposed_wait(clock::duration d) { add(exposed_wait_ns_, d); }

  Statistics snapshot() const {
    Statistics s;
    s.units = units_.load();
    s.bytes_sent = bytes_sent_.load();
    s.iterations = iterations_.load();
    s.queued_seconds = queued_ns_.load() * 1e-9;
    s.wire_seconds = wire_ns_.load() * 1e-9;
    s.exposed_wait_seconds = exposed_wait_ns_.load() * 1e-9;
    s.elements = elements_.load();
    s.elements_compressed = elements_compressed_.load();
    s.bytes_compressed = bytes_compressed_.load();
    return s;
  }

 private:
  static void add(std::atomic<std::int64_t>& acc, clock::duration d) {
    acc.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  std::atomic<std::uint64_t> units_{0}, bytes_sent_{0}, iterations_{0}, elements_{0}, elements_compressed_{0},
      bytes_compressed_{0};
  std::atomic<std::int64_t> queued_ns_{0}, wire_ns_{0}, exposed_wait_ns_{0};
};

/// One unit's life, reported to Options::on_unit when set (e.g. for a Chrome trace).
struct UnitEvent {
  using clock = std::chrono::steady_clock;
  std::uint32_t unit = 0;
  std::int64_t iteration = 0;
  std::size_t elements = 0;
  std::size_t bytes_sent = 0;
  clock::time_point ready, started, finished;
  std::vector<Counter> counters;  ///< the collective's own counts of this unit (collective::Runtime), often none
};

}  // namespace gradsync

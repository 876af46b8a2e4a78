#pragma once
/// Statistics a Synchronizer keeps, and the per-unit event it can report (for timelines).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace gradsync {

/// One unit's blocks under differential transmission (DGT, priority::Contribution).
struct BlockCounts {
  std::uint64_t important = 0;    ///< blocks classified important (sent reliably)
  std::uint64_t best_effort = 0;  ///< unimportant blocks (a worker sends them as datagrams, a server holds its own)
  std::uint64_t dropped = 0;      ///< of those, blocks the aggregate left out (kept in this rank's residual)
  std::uint64_t rejected = 0;     ///< datagrams this rank's server refused (corrupt, foreign, duplicate, late)
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
  // Differential transmission (DGT, priority::Contribution), summed over units:
  std::uint64_t blocks_important = 0;    ///< blocks classified important (sent reliably)
  std::uint64_t blocks_best_effort = 0;  ///< unimportant blocks (sent as datagrams; a server holds its own)
  std::uint64_t blocks_dropped = 0;      ///< of those, blocks the aggregate left out (in the residual)
  std::uint64_t datagrams_rejected = 0;  ///< datagrams this rank's server refused

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
    blocks_important += o.blocks_important;
    blocks_best_effort += o.blocks_best_effort;
    blocks_dropped += o.blocks_dropped;
    datagrams_rejected += o.datagrams_rejected;
    return *this;
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
  /// A unit's blocks under differential transmission.
  void blocks(const BlockCounts& b) {
    blocks_important_.fetch_add(b.important);
    blocks_best_effort_.fetch_add(b.best_effort);
    blocks_dropped_.fetch_add(b.dropped);
    datagrams_rejected_.fetch_add(b.rejected);
  }
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
    s.blocks_important = blocks_important_.load();
    s.blocks_best_effort = blocks_best_effort_.load();
    s.blocks_dropped = blocks_dropped_.load();
    s.datagrams_rejected = datagrams_rejected_.load();
    return s;
  }

 private:
  static void add(std::atomic<std::int64_t>& acc, clock::duration d) {
    acc.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  std::atomic<std::uint64_t> units_{0}, bytes_sent_{0}, iterations_{0}, elements_{0}, elements_compressed_{0},
      bytes_compressed_{0}, blocks_important_{0}, blocks_best_effort_{0}, blocks_dropped_{0}, datagrams_rejected_{0};
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
  BlockCounts blocks{};  ///< all zero unless the priority classifies blocks (DGT)
};

}  // namespace gradsync

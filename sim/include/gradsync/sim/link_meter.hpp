#pragma once
/// The tuner's online re-check: what the link delivers, read from the unit timings the
/// Synchronizer already reports (Options::on_unit), and when that has changed enough to tune again.
///
///  - LinkMeter: bytes this rank sent over the time any of its units was on the wire (the union of
///    the units' started..finished spans: units in flight at once share the link, so summing their
///    spans, as Statistics::wire_seconds does, would count the link twice).
///  - LinkWatch: the rate of the first window after a (re)tune is the baseline; two windows in a
///    row off it by more than `tolerance` the same way (one alone is noise: a busy core, a burst)
///    mean the network changed. Comparing rates measured the same way, not a rate with the
///    simulator's, keeps what the model gets wrong (latency per step, copies) out of the decision.
///    The same watch, on the window's median iteration time, catches what the rate misses: a few
///    milliseconds more latency move 2.5 MB units' rate by a sixth, but a window that holds one
///    unit at a time stalls on every round trip.
///    The spans say that the link changed, not what it became: they read its rate only while it
///    is the bottleneck (with compute in the way, a 30 Mbit/s link that became 1 Gbit/s read 0.23
///    Gbit/s), so the caller measures the link again before it tunes.
///
/// \code
///   gradsync::sim::LinkMeter meter;
///   options.on_unit = [&](const gradsync::UnitEvent& e) { meter.add(e); };
///   ...
///   gradsync::sim::LinkWatch watch(0.5);
///   if (watch.observe(meter.take().rate())) remeasure_and_retune();   // at an iteration boundary
/// \endcode
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/core/statistics.hpp>

namespace gradsync::sim {

/// What one window of units put on the wire.
struct LinkWindow {
  std::size_t units = 0;
  std::size_t bytes = 0;      ///< encoded bytes this rank sent
  double busy_seconds = 0;    ///< the union of the units' wire spans

  /// Bytes per second while the link was busy; 0 for a window without wire time.
  double rate() const { return busy_seconds > 0 ? double(bytes) / busy_seconds : 0; }
};

/// Collects units as they finish (from any thread) and hands them over a window at a time.
class LinkMeter {
 public:
  void add(const gradsync::UnitEvent& e) {
    std::lock_guard lock(mutex_);
    spans_.push_back({e.started, e.finished, e.bytes_sent});
  }

  /// The units added since the last take(), and starts a new window.
  LinkWindow take() {
    std::vector<Span> spans;
    {
      std::lock_guard lock(mutex_);
      spans.swap(spans_);
    }
    std::ranges::sort(spans, {}, &Span::started);
    LinkWindow w;
    w.units = spans.size();
    gradsync::UnitEvent::clock::time_point covered{};  // the end of the union so far
    for (const Span& s : spans) {
      w.bytes += s.bytes;
      const auto from = std::max(s.started, covered);
      if (s.finished > from) {
        w.busy_seconds += std::chrono::duration<double>(s.finished - from).count();
        covered = s.finished;
      }
    }
    return w;
  }

 private:
  struct Span {
    gradsync::UnitEvent::clock::time_point started, finished;
    std::size_t bytes;
  };
  std::mutex mutex_;
  std::vector<Span> spans_;
};

/// Decides, window by window, whether the link has changed since the last (re)tune.
class LinkWatch {
 public:
  /// Which changes count: both ways, or only a value that grew (an iteration time: early windows
  /// are slow while a job warms up, so a fall is mostly the warm-up ending).
  enum class Watch { both, rises };

  /// \param tolerance  relative change of the measured rate that counts as a new network
  explicit LinkWatch(double tolerance, Watch watch = Watch::both) : tolerance_(tolerance), watch_(watch) {
    if (!(tolerance > 0)) throw UsageError("gradsync: LinkWatch needs a positive tolerance");
  }

  /// A window's rate (LinkWindow::rate(), or another positive measure of it); when it changed
  /// (the second window in a row off the baseline the same way) returns that window's value over
  /// the baseline, and takes the next window as the new baseline. Values <= 0 are ignored.
  std::optional<double> observe(double rate) {
    if (!(rate > 0)) return std::nullopt;
    if (baseline_ == 0) {
      baseline_ = rate;
      return std::nullopt;
    }
    const double ratio = rate / baseline_;
    const int side = ratio > 1 + tolerance_                                    ? 1
                     : ratio < 1 / (1 + tolerance_) && watch_ == Watch::both ? -1
                                                                              : 0;
    const bool persists = side != 0 && side == last_side_;
    last_side_ = side;
    if (!persists) return std::nullopt;
    reset();
    return ratio;
  }
  /// Takes the next window as the baseline (after a re-tune that another watch triggered).
  void reset() {
    baseline_ = 0;
    last_side_ = 0;
  }

 private:
  double tolerance_;
  Watch watch_;
  double baseline_ = 0;  // the rate of the first window after the last (re)tune; 0: not yet measured
  int last_side_ = 0;    // the last window: slower (-1), faster (+1) or within tolerance (0)
};

}  // namespace gradsync::sim

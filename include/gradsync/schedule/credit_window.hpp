#pragma once
/// CreditWindow: rank 0's bound on what is on the wire at once (Options::credit_bytes,
/// Options::inflight_units), so a late, urgent unit waits for little; a unit larger than the
/// credit still goes, alone. Used by one chooser at a time.
#include <cstddef>

#include "control.hpp"

namespace gradsync::schedule {

class CreditWindow {
 public:
  CreditWindow(Control& control, std::size_t bytes, std::size_t units)
      : control_(control), credit_(bytes), units_(units) {}
  /// Waits until there is room for another unit (false once stopping): choose only then, so the
  /// choice is as late as possible.
  bool wait_for_room() {
    return control_.wait([&] { return inflight_units_ < units_ && inflight_bytes_ < credit_; });
  }
  /// Books `bytes` once they fit (or nothing else is in flight); false once stopping.
  bool take(std::size_t bytes) {
    if (!control_.wait([&] { return inflight_units_ == 0 || inflight_bytes_ + bytes <= credit_; })) return false;
    control_.change([&] {  // nothing waits for the window to fill
      ++inflight_units_;
      inflight_bytes_ += bytes;
    });
    return true;
  }
  /// Frees `bytes`; the caller holds the control's lock (inside Control::update, which wakes a
  /// chooser waiting for room).
  void give_back_locked(std::size_t bytes) {
    --inflight_units_;
    inflight_bytes_ -= bytes;
  }

 private:
  Control& control_;
  std::size_t credit_, units_;
  std::size_t inflight_units_ = 0, inflight_bytes_ = 0;  // guarded by the control's lock
};

}  // namespace gradsync::schedule

#pragma once
/// Hybrid (ImageNet in 4 minutes, section 4.3): Hierarchical for units below a size (many short
/// messages: latency-bound, fewer steps win), Ring from there on (bandwidth-bound: the ring moves
/// the fewest bytes per rank and spreads them over every link).
///
/// \code
///   gradsync::collective::Hybrid h{.threshold_bytes = 1 << 20};  // or AnyCollective::parse("hybrid:1MiB")
/// \endcode
#include "hierarchical.hpp"

namespace gradsync::collective {

struct Hybrid {
  std::size_t threshold_bytes = 256u << 10;  ///< fp32 bytes of a unit from which the ring is used
  Hierarchical small{};                      ///< the collective below the threshold
  /// Units only through the codec (device codecs too).
  static constexpr Traits traits() { return {.through_codec = true}; }

  std::string_view name() const { return "hybrid"; }
  /// "hybrid:bytes[:k]", as in AnyCollective::parse.
  std::string describe() const {
    return "hybrid:" + std::to_string(threshold_bytes) + (small.group > 0 ? ":" + std::to_string(small.group) : "");
  }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    if (job.data.size_bytes() < threshold_bytes) return small.run(t, codec, job, ws);
    return Ring{}.run(t, codec, job, ws);
  }
};
GRADSYNC_CHECK_COLLECTIVE(Hybrid);

}  // namespace gradsync::collective

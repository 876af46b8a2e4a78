#pragma once
/// Decision: what rank 0 tells every rank to run next, and what each executor runs.
#include <cstdint>

namespace gradsync::schedule {

/// A unit decided for execution in a given iteration.
struct Decision {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  std::uint32_t key = 0;  ///< the unit's priority key when rank 0 decided (collective::Job::priority)
};
static_assert(sizeof(Decision) == 16);  // it goes on the wire

}  // namespace gradsync::schedule

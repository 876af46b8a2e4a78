#pragma once
// Test support: a Synchronizer run with a compile-time collective and codec (1000-element slices of
// the uneven layout), and the lossy-codec case every collective must pass: within the codec's
// bound of the reference and bit-identical on every rank.
#include <catch2/catch.hpp>
#include <vector>

#include <gradsync/priority/forward_order.hpp>
#include <gradsync/slicing/fixed_slices.hpp>
#include <gradsync/synchronizer.hpp>

#include "lossy_codec.hpp"
#include "ranks.hpp"
#include "reference.hpp"

namespace testing {

template <class Codec, class K>
std::vector<Aggregates> run_with(K collective, int ranks, Codec codec = {}) {
  namespace gs = gradsync;
  using Sync = gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder, Codec, K>;
  return run_ranks<Aggregates>(ranks, [&](int r, gs::transport::Transport& t) {
    Sync sync(t, uneven_layout(), {}, {.slicing = {.max_elements = 1000}, .codec = codec, .collective = collective});
    return train_with(sync, r);
  });
}

template <class K>
void lossy_case(K collective, int ranks) {
  const auto got = run_with<RoundBf16>(collective, ranks);
  // every encode of a partial or final sum adds at most 2^-8 of the summed magnitudes
  require_reference(got[0], ranks, true, (ranks + 3) * RoundBf16::max_relative_error);
  for (int r = 1; r < ranks; ++r) REQUIRE(bit_identical(got[0], got[r]));  // lossy, yet identical
}

}  // namespace testing

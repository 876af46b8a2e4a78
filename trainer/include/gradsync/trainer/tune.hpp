#pragma once
// --tune: the setting gradsync's tuner (gradsync/sim/tuner.hpp) chooses for this model on the link
// measured between ranks 0 and 1. Rank 0 measures with rank 1, simulates the grid and tells every
// rank its choice, so all build the same Synchronizer (their handshake checks it).
#include <string>

#include <gradsync/sim/profile.hpp>
#include <gradsync/sim/tuner.hpp>
#include <gradsync/transport/transport.hpp>

namespace gradsync::trainer {

struct MeasuredLink {
  double bytes_per_second = 0;  ///< one way, rank 0 to rank 1
  double latency_seconds = 0;   ///< half the shortest round trip of a small message
};

struct Tuning {
  sim::Setting chosen;
  double default_seconds = 0;  ///< P3's default setting (fixed:40000, the library's window), simulated
  MeasuredLink link;
  double wall_seconds = 0;  ///< measuring and tuning, on rank 0
};

/// Every rank of `t` calls it with the same `space` (rank 0's `profile` is the one used); returns
/// rank 0's choice on every rank. One rank: nothing to measure, the choice for an idle link.
Tuning tune_on_link(transport::Transport& t, const sim::Profile& profile, const sim::TuneSpace& space);

}  // namespace gradsync::trainer

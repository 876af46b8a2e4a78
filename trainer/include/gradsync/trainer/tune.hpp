#pragma once
// --tune: the setting gradsync's tuner (gradsync/sim/tuner.hpp) chooses for this model on the link
// measured between ranks 0 and 1. Rank 0 measures with rank 1, simulates the grid and tells every
// rank its choice, so all build the same Synchronizer (their handshake checks it).
#include <span>
#include <string>
#include <type_traits>

#include <gradsync/sim/profile.hpp>
#include <gradsync/sim/tuner.hpp>
#include <gradsync/transport/transport.hpp>

namespace gradsync::trainer {

// Below gradsync's reserved tags, so a Synchronizer on the same transport never reads them.
inline constexpr transport::Tag tune_tag = transport::reserved_tags - 1;    ///< measuring, the first choice
inline constexpr transport::Tag retune_tag = transport::reserved_tags - 2;  ///< the online re-checks

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
/// rank 0's choice on every rank. Rank 0 measures with rank 1: ten round trips, then 1 MiB
/// messages for about a quarter of a second (at most 16 MiB). One rank: nothing to measure, the
/// choice for an idle link.
Tuning tune_on_link(transport::Transport& t, const sim::Profile& profile, const sim::TuneSpace& space);

/// Every rank calls it at the same point: every rank's `value` becomes rank 0's, sent with `tag`.
template <class T>
void from_rank0(transport::Transport& t, transport::Tag tag, T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (t.rank() == 0) {
    for (int r = 1; r < t.size(); ++r) t.send(r, tag, std::as_bytes(std::span(&value, 1)));
  } else if (t.recv(0, tag, std::as_writable_bytes(std::span(&value, 1))) != sizeof value) {
    throw PeerError("gradsync-train: --tune: rank 0's message came malformed (the ranks run different builds?)");
  }
}

/// The simulator's network for `ranks` ranks on `link` (one rank: nothing on the wire).
sim::Network network(int ranks, const MeasuredLink& link);

}  // namespace gradsync::trainer

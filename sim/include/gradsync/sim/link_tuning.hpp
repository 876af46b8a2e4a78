#pragma once
/// tune_on_link(): the setting the tuner (tuner.hpp) chooses for a model on the link measured
/// between ranks 0 and 1 of a running job. Rank 0 measures with rank 1, simulates the grid on its
/// profile and tells every rank its choice, so all build the same Synchronizer (their handshake
/// checks it). gradsync-train's --tune and gradsync.torch's slicing "auto" use it.
/// tune_for_link() tunes again on that link without measuring it: gradsync-train's second choice,
/// on the compute profile rank 0 measured in the first iterations.
///
/// \code
///   const auto t = gradsync::sim::tune_on_link(transport, profile, {.codec = "fp16"});  // every rank
///   t.chosen.slicing;  // rank 0's choice, e.g. "fixed:160000", on every rank
/// \endcode
#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/transport/bootstrap.hpp>
#include <gradsync/transport/transport.hpp>
#include "profile.hpp"
#include "tuner.hpp"

namespace gradsync::sim {

// From the tools' range, so a Synchronizer on the same transport never reads them.
inline constexpr transport::Tag tune_tag = transport::tool_tags.at(0);    ///< measuring, the first choice
inline constexpr transport::Tag retune_tag = transport::tool_tags.at(1);  ///< gradsync-train's online re-checks

struct MeasuredLink {
  double bytes_per_second = 0;  ///< one way, rank 0 to rank 1
  double latency_seconds = 0;   ///< half the shortest round trip of a small message
};

struct Tuning {
  Setting chosen;
  double default_seconds = 0;  ///< P3's default setting (fixed:40000, the library's window), simulated
  MeasuredLink link;
  double wall_seconds = 0;  ///< measuring and tuning, on rank 0
  double compute_seconds = 0;  ///< the profile's compute per iteration that rank 0 tuned on
  double cores = 0;            ///< the cores per rank it tuned for (TuneSpace::cores)
};

/// The simulator's network for `ranks` ranks on `link` (one rank: nothing on the wire).
inline Network network(int ranks, const MeasuredLink& link) {
  Network net;
  net.ranks = ranks;
  net.bytes_per_second = ranks > 1 ? link.bytes_per_second : 1e300;
  net.latency_seconds = link.latency_seconds;
  return net;
}

namespace detail {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Ten round trips, then the bulk part: enough 1 MiB messages to keep the link busy for about a
// quarter of a second, at most 16 (4 x 4 MiB took 4.6 s at 30 Mbit/s, a pause in training).
inline constexpr int round_trips = 10;
inline constexpr std::size_t bulk_bytes = std::size_t(1) << 20, max_bulk_messages = 16;
inline constexpr double bulk_seconds = 0.25;

// Rank 0's side of the measurement (rank 1 mirrors it in echo()).
inline MeasuredLink measure(transport::Transport& t) {
  std::byte small[8]{};
  double rtt = 1e300;
  for (int i = 0; i < round_trips; ++i) {
    const auto t0 = Clock::now();
    t.send(1, tune_tag, small);
    t.recv(1, tune_tag, small);
    rtt = std::min(rtt, seconds_since(t0));
  }
  // Two messages on the link at a time, each acknowledged: the clock runs on what rank 1 has,
  // not on what the send buffers took in.
  std::vector<std::byte> bulk(bulk_bytes);
  const auto t0 = Clock::now();
  std::size_t sent = 0;
  for (; sent < 2; ++sent) t.send(1, tune_tag, bulk);
  for (std::size_t acked = 0; acked < sent; ++acked) {
    t.recv(1, tune_tag, small);
    if (sent < max_bulk_messages && seconds_since(t0) < bulk_seconds) {
      t.send(1, tune_tag, bulk);
      ++sent;
    }
  }
  const double seconds = std::max(seconds_since(t0) - rtt, 1e-9);
  t.send(1, tune_tag, small);  // the end of the bulk part
  return {double(sent * bulk_bytes) / seconds, rtt / 2};
}

inline void echo(transport::Transport& t) {
  std::byte small[8]{};
  for (int i = 0; i < round_trips; ++i) {
    t.recv(0, tune_tag, small);
    t.send(0, tune_tag, small);
  }
  std::vector<std::byte> bulk(bulk_bytes);
  while (t.recv(0, tune_tag, bulk) == bulk_bytes) t.send(0, tune_tag, small);
}

// The choice as it travels from rank 0.
struct Message {
  char slicing[64], collective[64];
  std::uint64_t inflight_units, credit_bytes;
  double seconds, default_seconds, bytes_per_second, latency_seconds, wall_seconds, compute_seconds, cores;
};

inline void copy_name(char (&to)[64], const std::string& from) {
  if (from.size() >= sizeof to) throw ConfigError("gradsync: tuning: policy name too long: " + from);
  std::memset(to, 0, sizeof to);
  from.copy(to, from.size());
}

// Every rank calls it at the same point: returns rank 0's `rank0s` on every rank.
inline Tuning share_tuning(transport::Transport& t, const Tuning& rank0s) {
  Message m{};
  if (t.rank() == 0) {
    copy_name(m.slicing, rank0s.chosen.slicing);
    copy_name(m.collective, rank0s.chosen.collective);
    m.inflight_units = rank0s.chosen.inflight_units;
    m.credit_bytes = rank0s.chosen.credit_bytes;
    m.seconds = rank0s.chosen.iteration_seconds;
    m.default_seconds = rank0s.default_seconds;
    m.bytes_per_second = rank0s.link.bytes_per_second;
    m.latency_seconds = rank0s.link.latency_seconds;
    m.wall_seconds = rank0s.wall_seconds;
    m.compute_seconds = rank0s.compute_seconds;
    m.cores = rank0s.cores;
  }
  transport::broadcast_value(t, tune_tag, m);
  if (t.rank() == 0) return rank0s;
  return {{m.slicing, m.collective, m.inflight_units, m.credit_bytes, m.seconds},
          m.default_seconds,
          {m.bytes_per_second, m.latency_seconds},
          m.wall_seconds,
          m.compute_seconds,
          m.cores};
}

}  // namespace detail

namespace detail {

// Rank 0's choice for `profile` on `link` (P3's default beside it), timed from `t0`.
inline Tuning choose(const Profile& profile, const TuneSpace& space, int ranks, const MeasuredLink& link,
                     Clock::time_point t0) {
  Tuning tuning;
  tuning.link = link;
  const auto ranked = tune(profile, network(ranks, link), space);
  const Setting* p3 = p3_default(ranked, ranks);
  tuning.chosen = ranked.front();
  tuning.default_seconds = p3 ? p3->iteration_seconds : 0;
  tuning.wall_seconds = seconds_since(t0);
  tuning.compute_seconds = profile.compute_seconds();
  tuning.cores = space.cores;
  return tuning;
}

}  // namespace detail

/// Every rank of `t` calls it with the same `space` (rank 0's `profile` is the one used); returns
/// rank 0's choice on every rank. Rank 0 measures with rank 1: ten round trips, then 1 MiB
/// messages for about a quarter of a second (at most 16 MiB). One rank: nothing to measure, the
/// choice for an idle link.
inline Tuning tune_on_link(transport::Transport& t, const Profile& profile, const TuneSpace& space) {
  Tuning tuning;
  if (t.rank() == 0) {
    const auto t0 = detail::Clock::now();
    const MeasuredLink link = t.size() > 1 ? detail::measure(t) : MeasuredLink{};
    tuning = detail::choose(profile, space, t.size(), link, t0);
  } else if (t.rank() == 1) {
    detail::echo(t);
  }
  return detail::share_tuning(t, tuning);
}

/// tune_on_link() without measuring: rank 0 tunes its `profile` (a measured one, say) for the
/// `link` measured before and every rank gets its choice. Every rank of `t` calls it at the same
/// point with the same `space`; only rank 0's `profile` and `link` are read.
inline Tuning tune_for_link(transport::Transport& t, const Profile& profile, const TuneSpace& space,
                            const MeasuredLink& link) {
  Tuning tuning;
  if (t.rank() == 0) tuning = detail::choose(profile, space, t.size(), link, detail::Clock::now());
  return detail::share_tuning(t, tuning);
}

}  // namespace gradsync::sim

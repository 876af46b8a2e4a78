#include "gradsync/trainer/tune.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace gradsync::trainer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int round_trips = 10;
// The bulk part: enough 1 MiB messages to keep the link busy for about bulk_seconds, at most
// max_bulk_messages (4 x 4 MiB took 4.6 s at 30 Mbit/s, a pause in training for a re-check).
constexpr std::size_t bulk_bytes = std::size_t(1) << 20, max_bulk_messages = 16;
constexpr double bulk_seconds = 0.25;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rank 0's side of the measurement (rank 1 mirrors it in echo()).
MeasuredLink measure(transport::Transport& t) {
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

void echo(transport::Transport& t) {
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
  double seconds, default_seconds, bytes_per_second, latency_seconds, wall_seconds;
};

void copy_name(char (&to)[64], const std::string& from) {
  if (from.size() >= sizeof to) throw ConfigError("gradsync-train: --tune: policy name too long: " + from);
  std::memset(to, 0, sizeof to);
  from.copy(to, from.size());
}

// Every rank calls it at the same point: returns rank 0's `rank0s` on every rank, sent with `tag`.
Tuning share_tuning(transport::Transport& t, transport::Tag tag, const Tuning& rank0s) {
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
  }
  from_rank0(t, tag, m);
  if (t.rank() == 0) return rank0s;
  return {{m.slicing, m.collective, m.inflight_units, m.credit_bytes, m.seconds},
          m.default_seconds,
          {m.bytes_per_second, m.latency_seconds},
          m.wall_seconds};
}

}  // namespace

Tuning tune_on_link(transport::Transport& t, const sim::Profile& profile, const sim::TuneSpace& space) {
  Tuning tuning;
  if (t.rank() == 0) {
    const auto t0 = Clock::now();
    if (t.size() > 1) tuning.link = measure(t);
    const auto ranked = sim::tune(profile, network(t.size(), tuning.link), space);
    const sim::Setting* p3 = sim::p3_default(ranked);
    tuning.chosen = ranked.front();
    tuning.default_seconds = p3 ? p3->iteration_seconds : 0;
    tuning.wall_seconds = seconds_since(t0);
  } else if (t.rank() == 1) {
    echo(t);
  }
  return share_tuning(t, tune_tag, tuning);
}

sim::Network network(int ranks, const MeasuredLink& link) {
  sim::Network net;
  net.ranks = ranks;
  net.bytes_per_second = ranks > 1 ? link.bytes_per_second : 1e300;
  net.latency_seconds = link.latency_seconds;
  return net;
}

}  // namespace gradsync::trainer

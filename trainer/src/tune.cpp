#include "gradsync/trainer/tune.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace gradsync::trainer {
namespace {

using Clock = std::chrono::steady_clock;
// Below gradsync's reserved tags; no Synchronizer exists yet on this transport to share it.
constexpr transport::Tag tune_tag = transport::reserved_tags - 1;
constexpr int round_trips = 10;
constexpr std::size_t bulk_messages = 4, bulk_bytes = std::size_t(4) << 20;

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
  std::vector<std::byte> bulk(bulk_bytes);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < bulk_messages; ++i) t.send(1, tune_tag, bulk);
  t.recv(1, tune_tag, small);  // rank 1 has all of it
  const double seconds = std::max(seconds_since(t0) - rtt, 1e-9);
  return {double(bulk_messages * bulk_bytes) / seconds, rtt / 2};
}

void echo(transport::Transport& t) {
  std::byte small[8]{};
  for (int i = 0; i < round_trips; ++i) {
    t.recv(0, tune_tag, small);
    t.send(0, tune_tag, small);
  }
  std::vector<std::byte> bulk(bulk_bytes);
  for (std::size_t i = 0; i < bulk_messages; ++i) t.recv(0, tune_tag, bulk);
  t.send(0, tune_tag, small);
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

}  // namespace

Tuning tune_on_link(transport::Transport& t, const sim::Profile& profile, const sim::TuneSpace& space) {
  Message m{};
  if (t.rank() == 0) {
    const auto t0 = Clock::now();
    Tuning tuning;
    if (t.size() > 1) tuning.link = measure(t);
    sim::Network net;
    net.ranks = t.size();
    net.bytes_per_second = t.size() > 1 ? tuning.link.bytes_per_second : 1e300;
    net.latency_seconds = tuning.link.latency_seconds;
    const auto ranked = sim::tune(profile, net, space);
    const sim::Setting* p3 = sim::p3_default(ranked);
    copy_name(m.slicing, ranked.front().slicing);
    copy_name(m.collective, ranked.front().collective);
    m.inflight_units = ranked.front().inflight_units;
    m.credit_bytes = ranked.front().credit_bytes;
    m.seconds = ranked.front().iteration_seconds;
    m.default_seconds = p3 ? p3->iteration_seconds : 0;
    m.bytes_per_second = tuning.link.bytes_per_second;
    m.latency_seconds = tuning.link.latency_seconds;
    m.wall_seconds = seconds_since(t0);
    for (int r = 1; r < t.size(); ++r) t.send(r, tune_tag, std::as_bytes(std::span(&m, 1)));
  } else {
    if (t.rank() == 1) echo(t);
    if (t.recv(0, tune_tag, std::as_writable_bytes(std::span(&m, 1))) != sizeof m)
      throw PeerError("gradsync-train: --tune: rank 0's choice came malformed (the ranks run different builds?)");
  }
  return {{m.slicing, m.collective, m.inflight_units, m.credit_bytes, m.seconds},
          m.default_seconds,
          {m.bytes_per_second, m.latency_seconds},
          m.wall_seconds};
}

}  // namespace gradsync::trainer

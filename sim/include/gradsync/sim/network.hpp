#pragma once
/// Network: the cluster the simulator models. `ranks` identical workers, each with a full-duplex
/// link of `bytes_per_second` each way and `latency_seconds` one-way delay per message.
///
///  - `shared_nic` (default): all of a rank's sends share one NIC (and all its receives), as on a
///    real cluster and as P3 shaped its links with tc (gradsync::transport::Link's "/nic").
///  - otherwise each pair of ranks has its own link (a full-bisection fabric; gradsync::transport::Link's
///    default, what the Throttled transport emulates without "/nic"): a rank that talks to
///    several peers at once gets the full rate to each.
///  - `dedicated_servers` (parameter server only): 0 puts the servers on the workers, one shard
///    per rank (gradsync's collective::ParameterServer); S > 0 models S separate server machines
///    with links like the workers' (P3's figures: one worker, one server).
///
/// \code
///   auto net = gradsync::sim::Network::from(gradsync::transport::Link::parse("10gbit+20us"), 64);
///   net.shared_nic = true;    // the simulator's default; "/nic" in the string says the same
/// \endcode
#include <cmath>
#include <string>

#include <gradsync/core/error.hpp>
#include <gradsync/transport/link.hpp>

namespace gradsync::sim {

struct Network {
  int ranks = 1;                      ///< workers (data-parallel replicas)
  double bytes_per_second = 1.25e9;   ///< per link and direction (10 Gbit/s)
  double latency_seconds = 0;         ///< one-way, per message (per step of a collective)
  bool shared_nic = true;             ///< one NIC per rank (true) or one link per pair of ranks
  int dedicated_servers = 0;          ///< parameter server: 0 = co-located shards, S = S server machines

  /// The network of `ranks` ranks with `link`'s bandwidth and latency; NIC-shared always (the
  /// simulator's default: set shared_nic = false for a link per pair).
  static Network from(const transport::Link& link, int ranks) {
    Network n;
    n.ranks = ranks;
    n.bytes_per_second = link.bytes_per_second();
    n.latency_seconds = std::chrono::duration<double>(link.latency).count();
    return n;
  }

  /// Throws ConfigError naming the bad field and the fix.
  void validate() const {
    if (ranks < 1) throw ConfigError("gradsync: the simulated network needs at least 1 rank, got " + std::to_string(ranks));
    if (!(bytes_per_second > 0))
      throw ConfigError("gradsync: link bandwidth must be positive (e.g. --bandwidth 10gbit)");
    if (!(latency_seconds >= 0) || !std::isfinite(latency_seconds))
      throw ConfigError("gradsync: link latency must be a finite time >= 0 (e.g. --latency 20us)");
    if (dedicated_servers < 0)
      throw ConfigError("gradsync: dedicated servers must be >= 0 (0: one shard on every rank)");
  }

  /// Serialization time of `bytes` on one link.
  double seconds(double bytes) const { return bytes / bytes_per_second; }
};

}  // namespace gradsync::sim

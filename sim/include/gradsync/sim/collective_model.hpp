#pragma once
/// CollectiveModel: what one unit's collective costs, analytically, on the resources of one
/// representative rank (all ranks run the same iteration, so one rank's timeline stands for all).
/// Parsed from gradsync-train's --collective strings. A unit of n elements whose wire form takes
/// w(m) bytes for m elements, on p ranks with per-link rate B and latency a:
///
///   ring              2(p-1) steps of w(n/p):  link busy 2(p-1) w(n/p) / B, plus 2(p-1) a; raw
///                     floats on 2 ranks one exchange of w(n) (collective::Ring): the same busy
///                     time, one a
///   hierarchical[:k]  groups of k, G = ceil(p/k) groups; ImageNet-in-4-minutes' three phases:
///                     intra-group reduce 2(k-1) steps of w(n/k), ring of the G leaders 2(G-1)
///                     steps of w(n/G), intra-group broadcast 2(k-1) steps of w(n/k):
///                     4(k-1) + 2(G-1) steps instead of the ring's 2(p-1); k = 0: round(sqrt(p/2)),
///                     at least 2 (collective::Hierarchical's automatic size)
///   hybrid[:bytes[:k]] hierarchical for units under `bytes` of fp32 (default 256 KiB), ring above
///   reduce-broadcast  2 steps; NIC-shared: 2(p-1) w(n/p) bytes each way, per pair: 2 w(n/p)
///   ps                P3's push then broadcast through the unit's server: push (the server
///                     receives p-1 pushes of w(n)), server update (p-1 sums of n), broadcast
///                     (it sends p-1 copies). Co-located (gradsync's ParameterServer, shard u mod p):
///                     with a shared NIC each rank sends and receives (p-1)/p w(n) per phase on
///                     average, and a unit's phase lasts (p-1) w(n) / B (the server's NIC) + a;
///                     per pair, a push is one w(n) on the link to shard u mod p. Dedicated servers
///                     (Network::dedicated_servers = S): the worker's tx (w(n)) and the server's rx
///                     (p w(n)) at once, then the update, then the server's tx and the worker's rx.
///   mpi, nccl         modelled as ring; nccl-hierarchical[:k] as hierarchical
///
/// tensor_pull (ps; gradsync-sim --tensor-pull) models MXNet KVStore, P3's baseline: a worker
/// pulls a layer only once every worker has pushed all of it (P3, section 2), so a unit's
/// broadcast waits until every unit of its tensor is aggregated (a Stage with `barrier`).
///
/// A lossy codec adds its encode before the wire and decodes after it (twice for the ring family:
/// its own chunks and the aggregate), on the executor thread: time, not a shared resource.
///
/// A unit's collective is a list of Stages. A stage uses one or two resources at once, each for
/// its own busy time, and then waits `delay` (latency, codec work) without holding them; the next
/// stage starts when it ends. Collectives of units in flight serve resources in priority order.
///
/// \code
///   auto c = gradsync::sim::CollectiveModel::parse("hierarchical:16");
///   c.steps(1024, 4 << 20);          // 4*15 + 2*63 = 186, against the ring's 2046
/// \endcode
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gradsync/collective/spec.hpp>
#include "codec_model.hpp"
#include "network.hpp"

namespace gradsync::sim {

/// What a stage holds while it is busy. Indexed ones (server_*, up, down) are per shard.
enum class Resource : std::uint8_t {
  tx,         ///< the rank's sends (its NIC's outgoing direction)
  rx,         ///< the rank's receives
  server,     ///< a parameter-server shard's update (decode-add of the pushes)
  server_rx,  ///< a dedicated server's receives
  server_tx,  ///< a dedicated server's sends
  up,         ///< per-pair links: the link to a shard's rank
  down,       ///< per-pair links: the link from a shard's rank
};
inline constexpr std::size_t resource_kinds = 7;
inline constexpr std::string_view resource_names[resource_kinds] = {"tx", "rx", "server", "server_rx",
                                                                    "server_tx", "up", "down"};

struct Use {
  Resource resource = Resource::tx;
  std::uint32_t shard = 0;  ///< which server / link, for the indexed resources
  double busy = 0;          ///< seconds held
};

struct Stage {
  std::array<Use, 2> uses{};
  std::uint8_t count = 0;  ///< how many of `uses` are real (0: a pure delay)
  double delay = 0;        ///< seconds after the uses end before the next stage
  bool barrier = false;    ///< (count 0) waits until every unit of its first tensor reached it
  double busy() const { return count == 0 ? 0 : count == 1 ? uses[0].busy : std::max(uses[0].busy, uses[1].busy); }
};

/// One unit as the cost model sees it.
struct UnitWork {
  std::uint32_t index = 0;    ///< the unit's index in the plan (picks a PS shard)
  std::size_t elements = 0;
  bool fp32 = false;          ///< bypasses the codec (all its tensors under the bypass threshold)
};

struct CollectiveModel {
  enum class Kind { ring, hierarchical, hybrid, reduce_broadcast, ps };
  Kind kind = Kind::ring;
  int group = 0;                             ///< hierarchical / hybrid: ranks per group (0: automatic)
  std::size_t threshold_bytes = 256u << 10;  ///< hybrid: fp32 bytes from which the ring is used
  bool tensor_pull = false;                  ///< ps: broadcast a tensor's units once all are aggregated
  std::string text = "ring";                 ///< as parsed
  bool exchanges = true;  ///< collective::Ring itself: raw floats on 2 ranks are one exchange

  static CollectiveModel parse(std::string_view text) {
    using K = collective::Spec::Kind;
    const collective::Spec s = collective::Spec::parse(text);
    CollectiveModel m;
    m.text = std::string(text);
    m.group = s.group;
    if (s.threshold_bytes) m.threshold_bytes = *s.threshold_bytes;
    switch (s.kind) {
      case K::ring: case K::mpi: case K::gloo: case K::nccl:
        m.kind = Kind::ring;
        m.exchanges = s.kind == K::ring;
        break;
      case K::ps: case K::dgt: m.kind = Kind::ps; break;  // dgt: its dropped blocks are not modelled
      case K::reduce_broadcast: m.kind = Kind::reduce_broadcast; break;
      case K::hierarchical: case K::nccl_hierarchical: m.kind = Kind::hierarchical; break;
      case K::hybrid: m.kind = Kind::hybrid; break;
    }
    return m;
  }

  /// The group size on `ranks` ranks (collective::Hierarchical::group_size's rule).
  int group_size(int ranks) const {
    const int k = group > 0 ? group : std::max(2, static_cast<int>(std::lround(std::sqrt(ranks / 2.0))));
    return std::clamp(k, 1, std::max(ranks, 1));
  }
  /// Whether a unit of `fp32_bytes` goes hierarchically.
  bool hierarchical_for(std::size_t fp32_bytes) const {
    return kind == Kind::hierarchical || (kind == Kind::hybrid && fp32_bytes < threshold_bytes);
  }

  /// Message steps on the critical path of one unit of `fp32_bytes` on `ranks` ranks (each costs
  /// one latency): the ring's 2(p-1), hierarchical's 4(k-1) + 2(p/k - 1), 2 for reduce-broadcast
  /// and for the parameter server (push, broadcast).
  std::size_t steps(int ranks, std::size_t fp32_bytes) const {
    const std::size_t p = static_cast<std::size_t>(ranks);
    if (p <= 1) return 0;
    if (hierarchical_for(fp32_bytes)) {
      const std::size_t k = static_cast<std::size_t>(group_size(ranks)), groups = (p + k - 1) / k;
      return 4 * (k - 1) + 2 * (groups - 1);
    }
    if (kind == Kind::reduce_broadcast || kind == Kind::ps) return 2;
    return 2 * (p - 1);
  }

  /// Appends unit `u`'s stages to `out`.
  void stages(const UnitWork& u, const CodecModel& codec, const Network& net, std::vector<Stage>& out) const {
    const int p = net.ranks;
    const bool ps = kind == Kind::ps;
    if (p == 1 && !(ps && net.dedicated_servers > 0)) return;  // one rank: its gradient is the sum
    const bool coded = !u.fp32 && !codec.lossless();
    auto pause = [&](double s) {
      if (s > 0) out.push_back(Stage{{}, 0, s});
    };
    auto wire = [&](std::size_t m) { return double(codec.wire_bytes(std::max<std::size_t>(m, 1), u.fp32)); };
    auto part = [&](std::size_t parts) { return (u.elements + parts - 1) / parts; };
    if (coded) pause(codec.encode_seconds(u.elements));
    if (ps) {
      parameter_server(u, codec, net, coded, wire(u.elements), tensor_pull, out);
      if (coded) pause(codec.decode_seconds(u.elements));
      return;
    }
    double bytes = 0;  // sent (and received) by the busiest rank
    const bool exchange = kind == Kind::ring && exchanges && p == 2 && codec.raw(u.fp32);
    const std::size_t steps_taken = exchange ? 1 : steps(p, u.elements * sizeof(float));
    if (hierarchical_for(u.elements * sizeof(float))) {
      const std::size_t k = static_cast<std::size_t>(group_size(p)), groups = (std::size_t(p) + k - 1) / k;
      bytes = 4.0 * double(k - 1) * wire(part(k)) + 2.0 * double(groups - 1) * wire(part(groups));
    } else if (kind == Kind::reduce_broadcast) {
      bytes = 2.0 * (net.shared_nic ? double(p - 1) : 1.0) * wire(part(std::size_t(p)));
    } else {
      bytes = 2.0 * double(p - 1) * wire(part(std::size_t(p)));
    }
    duplex(net.seconds(bytes), double(steps_taken) * net.latency_seconds, out);
    if (coded) pause(2 * codec.decode_seconds(u.elements));
  }

  std::string describe() const { return tensor_pull ? text + " (tensor pull)" : text; }

 private:
  /// Both directions of the rank's NIC for `busy`, then `delay`.
  static void duplex(double busy, double delay, std::vector<Stage>& out) {
    out.push_back(Stage{{Use{Resource::tx, 0, busy}, Use{Resource::rx, 0, busy}}, 2, delay});
  }

  static void parameter_server(const UnitWork& u, const CodecModel& codec, const Network& net, bool coded, double w,
                               bool tensor_pull, std::vector<Stage>& out) {
    const double p = net.ranks, a = net.latency_seconds;
    const bool dedicated = net.dedicated_servers > 0;
    const auto shard = static_cast<std::uint32_t>(u.index % std::uint32_t(dedicated ? net.dedicated_servers : net.ranks));
    const double pushes = dedicated ? p : p - 1;  // a co-located server adds its own gradient for free
    double update = pushes * codec.sum_seconds(u.elements);
    if (coded) update += pushes * codec.decode_seconds(u.elements) + codec.encode_seconds(u.elements);
    const auto server = [&] {
      out.push_back(Stage{{Use{Resource::server, shard, update}}, 1, 0});
      if (tensor_pull) out.push_back(Stage{{}, 0, 0, true});
    };
    if (dedicated && net.shared_nic) {
      out.push_back(Stage{{Use{Resource::tx, 0, net.seconds(w)}, Use{Resource::server_rx, shard, net.seconds(p * w)}}, 2, a});
      server();
      out.push_back(Stage{{Use{Resource::server_tx, shard, net.seconds(p * w)}, Use{Resource::rx, 0, net.seconds(w)}}, 2, a});
    } else if (!net.shared_nic) {  // a link per pair; a server's receives are not limited (as Throttled)
      out.push_back(Stage{{Use{Resource::up, shard, net.seconds(w)}}, 1, a});
      server();
      out.push_back(Stage{{Use{Resource::down, shard, net.seconds(w)}}, 1, a});
    } else {  // co-located shards, shared NIC: the average rank's load, the server's NIC's duration
      const double busy = net.seconds((p - 1) / p * w), phase = net.seconds((p - 1) * w);
      duplex(busy, phase - busy + a, out);
      server();
      duplex(busy, phase - busy + a, out);
    }
  }
};

}  // namespace gradsync::sim

#pragma once
/// The Collective concept: aggregates one unit across all ranks over a Transport. Every
/// collective leaves the same thing in `job.data` on every rank: the sum (or mean, when
/// job.average) of all ranks' data, bit-identical across ranks.
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "../codec/concept.hpp"
#include "../codec/identity.hpp"
#include "../transport/transport.hpp"

namespace gradsync::collective {

class Server;

/// One unit to aggregate.
struct Job {
  std::span<float> data;            ///< this rank's gradient in, the aggregate out
  transport::Tag tag = 0;           ///< message tag of this unit (its index)
  /// seed / iteration / unit for stochastic codecs; `residual`: the unit's error-feedback memory
  /// on this rank (same length as data) when the codec keeps one, passed by the collective to
  /// every encode it makes of the unit, stretch by stretch (collective/wire.hpp)
  codec::EncodeContext ctx{};
  bool average = true;              ///< mean instead of sum
  /// Position of this unit in the schedule, the same on every rank (the Synchronizer sets it).
  /// Collectives over MPI's own all-reduce issue units in this order, since MPI collectives have
  /// no tags; empty: the caller runs one unit at a time, in the same order on every rank.
  std::optional<std::uint64_t> sequence{};
  std::uint32_t priority = 0;       ///< the unit's priority key (lower is more urgent)
  /// The Synchronizer's parameter-server thread, for collectives with a server role; none: the
  /// collective serves on the calling thread.
  Server* server = nullptr;
};

/// Scratch buffers for encoded messages (grown by detail::Wire to each message's wire size) and
/// the ids of the ring's copy-free sends in flight. One per executor, so a collective never
/// allocates per unit once they have grown.
struct Workspace {
  std::vector<std::byte> send, recv;
  std::vector<transport::Transport::SendId> sends;
};

// clang-format off
template <class K>
concept Collective = std::copy_constructible<K> &&
  requires(const K k, transport::Transport& t, const codec::Identity& c, Job& job, Workspace& ws) {
    { k.name() } -> std::convertible_to<std::string_view>;
    { k.run(t, c, job, ws) } -> std::same_as<std::size_t>;  // bytes this rank sent
  };
// clang-format on

#define GRADSYNC_CHECK_COLLECTIVE(K)                                                              \
  static_assert(::gradsync::collective::Collective<K>,                                            \
                "gradsync: this type is not a Collective: provide const member functions name() " \
                "and template <Codec C> run(Transport&, const C&, Job&, Workspace&) -> "          \
                "std::size_t (bytes sent); see gradsync/collective/concept.hpp")

/// Whether `k` aggregates units that live in GPU memory (the NCCL collectives, which declare
/// `bool device_memory() const`); every other collective reads and writes units on the host.
template <class K>
bool accepts_device_memory(const K& k) {
  if constexpr (requires { k.device_memory(); }) return k.device_memory();
  else return false;
}

namespace detail {
inline void finish_mean(std::span<float> data, bool average, int ranks) {
  if (!average || ranks == 1) return;
  const float n = static_cast<float>(ranks);
  for (float& x : data) x /= n;
}
/// RNG stream of an encode: which rank encodes, at which step, so ranks never share random bits.
inline std::uint32_t stream(int rank, int step) { return (static_cast<std::uint32_t>(rank) << 16) | static_cast<std::uint32_t>(step); }
}  // namespace detail

}  // namespace gradsync::collective

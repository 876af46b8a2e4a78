#pragma once
/// The Collective concept: aggregates one unit across all ranks over a Transport. Every
/// collective leaves the same thing in `job.data` on every rank: the sum (or mean, when
/// job.average) of all ranks' data, bit-identical across ranks.
#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../codec/concept.hpp"
#include "../codec/identity.hpp"
#include "../codec/memory.hpp"
#include "../codec/traits.hpp"
#include "../core/error.hpp"
#include "../core/statistics.hpp"
#include "../transport/transport.hpp"
#include "../transport/wait.hpp"
#include "traits.hpp"

namespace gradsync::collective {

class Runtime;

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
};

/// What a collective learns when a Synchronizer starts it.
struct Setup {
  transport::Transport& transport;          ///< the synchronizer's transport (its timeout, its cancellation)
  std::vector<std::size_t> elements;        ///< each unit's elements; units are tagged 0 .. elements.size()-1
  std::vector<std::size_t> lane_capacity;   ///< how many units a lane of each priority key may hold
  std::uint64_t session = 0;                ///< the synchronizer's handshake session (stale messages carry another)
};

/// Scratch buffers for encoded messages (grown by detail::Wire to each message's wire size) and
/// the ids of the ring's copy-free sends in flight. One per executor, so a collective never
/// allocates per unit once they have grown.
struct Workspace {
  std::vector<std::byte> send, recv;
  std::vector<transport::Transport::SendId> sends;
};

/// What a collective keeps per synchronizer besides its knobs: a server thread, a connection,
/// what it learned from the training. A collective that needs one declares its type, derived from
/// Runtime, and is started once, before its first unit, and then runs each unit with it:
///   using State = ...;
///   std::unique_ptr<State> start(const Setup&) const;
///   std::size_t run(Transport&, const C&, Job&, Workspace&, State&) const;
/// (collective::start and collective::run below call either kind). The engine owns the state, so
/// the collective stays a value: copies of it never share a thread or a socket.
class Runtime {
 public:
  virtual ~Runtime() = default;
  /// Ends what start began (fails the units it still holds, joins its threads); once, after the last unit.
  virtual void stop() {}
  /// The rank a unit waits for on a thread of the runtime's own, and since when (peer -1: none):
  /// whom this rank is stuck on (schedule::Watchdog).
  virtual transport::Wait stall() const { return {}; }
  /// This iteration's training loss, before the backward pass (Synchronizer::report_loss), for a
  /// collective that adapts to it; the others ignore it.
  virtual void report_loss(float loss) { (void)loss; }
  /// Counts of its own work on this rank: summed over units, and of unit `unit`'s latest run
  /// (read from Options::on_unit, before the unit may run again).
  virtual std::vector<Counter> counters() const { return {}; }
  virtual std::vector<Counter> counters(std::uint32_t unit) const {
    (void)unit;
    return {};
  }
  /// Checkpoints: what it learned from the training, as floats (Synchronizer::state()), so a
  /// resumed run continues as the interrupted one would have.
  virtual std::size_t state_size() const { return 0; }
  virtual void save_state(std::span<float> out) const { (void)out; }
  virtual void load_state(std::span<const float> in) { (void)in; }
};

/// Whether collective K keeps a State (above).
template <class K>
concept Stateful = requires { typename K::State; } && std::derived_from<typename K::State, Runtime>;

/// What collective K keeps per synchronizer: its State, or a Runtime that keeps nothing.
template <class K>
struct state_of {
  using type = Runtime;
};
template <Stateful K>
struct state_of<K> {
  using type = typename K::State;
};
template <class K>
using state_t = typename state_of<K>::type;

/// Starts `k` for a synchronizer: its State, or a Runtime that keeps nothing.
template <class K>
std::unique_ptr<state_t<K>> start(const K& k, const Setup& setup) {
  if constexpr (Stateful<K>) return k.start(setup);
  else return std::make_unique<Runtime>();
}

/// Runs one unit of `k` with what start() made for it.
template <class K, class C>
std::size_t run(const K& k, transport::Transport& t, const C& c, Job& job, Workspace& ws, state_t<K>& state) {
  if constexpr (Stateful<K>) return k.run(t, c, job, ws, state);
  else return k.run(t, c, job, ws);
}

// clang-format off
template <class K>
concept RunsWithState = Stateful<K> &&
  requires(const K k, transport::Transport& t, const codec::Identity& c, Job& job, Workspace& ws,
           typename K::State& state, const Setup& setup) {
    { k.start(setup) } -> std::same_as<std::unique_ptr<typename K::State>>;
    { k.run(t, c, job, ws, state) } -> std::same_as<std::size_t>;  // bytes this rank sent
  };
template <class K>
concept RunsAlone = requires(const K k, transport::Transport& t, const codec::Identity& c, Job& job, Workspace& ws) {
    { k.run(t, c, job, ws) } -> std::same_as<std::size_t>;  // bytes this rank sent
  };
template <class K>
concept Collective = std::copy_constructible<K> && DeclaresTraits<K> &&
  requires(const K k) { { k.name() } -> std::convertible_to<std::string_view>; } &&
  (Stateful<K> ? RunsWithState<K> : RunsAlone<K>);
// clang-format on

#define GRADSYNC_CHECK_COLLECTIVE(K)                                                               \
  static_assert(::gradsync::collective::DeclaresTraits<K>,                                         \
                "gradsync: this collective does not declare its traits: add "                      \
                "static constexpr gradsync::collective::Traits traits() { return {...}; } "        \
                "(Traits{} when it needs nothing: any codec, host memory, no held-back parts); "   \
                "see gradsync/collective/traits.hpp");                                             \
  static_assert(!::gradsync::collective::SpellsTraitsOutside<K>,                                   \
                "gradsync: this collective has a member holds_back, through_codec, "               \
                "needs_lossless_codec, lossless_because or (accepts_)device_memory, which nothing "\
                "reads: declare it in its traits() instead (gradsync::collective::Traits)");       \
  static_assert(::gradsync::collective::Collective<K>,                                             \
                "gradsync: this type is not a Collective: provide const member functions name(), " \
                "traits() and template <Codec C> run(Transport&, const C&, Job&, Workspace&) -> "  \
                "std::size_t (bytes sent), with a State& last for a collective that declares a "   \
                "State and start(); see gradsync/collective/concept.hpp")

/// Collective K can aggregate with codec C: a collective whose type needs a lossless codec
/// (Traits::needs_lossless_codec) is refused every codec known at compile time to be lossy.
template <class K, class C>
concept Accepts = Collective<K> && codec::Codec<C> &&
                  (!static_traits<K>.value_or(Traits{}).needs_lossless_codec ||
                   codec::static_lossless<C> != std::optional<bool>(false));

#define GRADSYNC_CHECK_ACCEPTS(K, C)                                                              \
  static_assert(::gradsync::collective::Accepts<K, C>,                                            \
                "gradsync: this collective sums fp32 values in a vendor library (MPI, NCCL) and " \
                "needs a lossless codec (codec::Identity); with a compressing codec use "         \
                "collective::Ring, ReduceBroadcast, Hierarchical or Hybrid")

/// The same check at run time, for policies chosen from strings; throws ConfigError naming both
/// and why (Traits::lossless_because).
template <class K, class C>
void check_accepts(const K& k, const C& c) {
  const Traits t = k.traits();
  if (t.needs_lossless_codec && !c.traits().lossless)
    throw ConfigError("gradsync: collective '" + std::string(k.name()) + "' " + std::string(t.lossless_because) + " and "
                      "needs a lossless codec (fp32), not '" + std::string(c.name()) +
                      "'; with a compressing codec use 'ring', 'reduce-broadcast', 'hierarchical' or 'hybrid'");
}

namespace detail {
/// What each rank sends in a ring all-reduce of `bytes` over `ranks` (reduce-scatter, then
/// all-gather): the count vendor collectives report, since their libraries do not say.
inline std::size_t ring_bytes(std::size_t bytes, int ranks) {
  return bytes * 2 * static_cast<std::size_t>(ranks - 1) / static_cast<std::size_t>(ranks);
}
/// data /= ranks when `average` (the mean), where codec `c` keeps the unit (codec/memory.hpp).
template <class C = codec::Identity>
void finish_mean(std::span<float> data, bool average, int ranks, const C& c = {}) {
  if (average && ranks > 1) codec::divide(c, data, ranks);
}
/// RNG stream of an encode: which rank encodes, at which step, so ranks never share random bits.
inline std::uint32_t stream(int rank, int step) { return (static_cast<std::uint32_t>(rank) << 16) | static_cast<std::uint32_t>(step); }
}  // namespace detail

}  // namespace gradsync::collective

#pragma once
/// AnySynchronizer: a Synchronizer whose policies are chosen from strings at run time — one
/// instantiation serves a whole CLI (gradsync-train). Library users who know their policies at
/// compile time use Synchronizer directly and pay nothing for the choice.
///
/// \code
///   gradsync::AnySynchronizer sync{transport, layout, {.slicing = "fixed:40000", .codec = "qsgd8",
///                                                      .collective = "ps"}};
/// \endcode
///
/// Unknown or malformed names throw ConfigError listing the valid ones. A CLI that starts several
/// ranks parses once, before any rank starts, and builds each rank's synchronizer from the result:
///
/// \code
///   const auto policies = gradsync::AnySynchronizer::parse(names);   // ConfigError here, at once
///   gradsync::collective::check_accepts(policies.collective, policies.codec);
///   gradsync::AnySynchronizer sync{transport, layout, options, policies};
/// \endcode
#include <string>
#include <string_view>

#include "codec/any.hpp"
#include "collective/any.hpp"
#include "priority/any.hpp"
#include "slicing/any.hpp"
#include "synchronizer.hpp"

namespace gradsync {

/// Policy names for AnySynchronizer; see each Any... policy for the accepted strings.
struct PolicyNames {
  std::string slicing = "fixed:40000";
  std::string priority = "forward";
  std::string codec = "fp32";
  std::string collective = "ring";
};

class AnySynchronizer
    : public Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective> {
  using Base = Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;

 public:
  /// The policy objects `names` choose; throws ConfigError naming the bad one.
  static Policies parse(const PolicyNames& names) {
    return {slicing::AnySlicing::parse(names.slicing), priority::AnyPriority::parse(names.priority),
            codec::AnyCodec::parse(names.codec), collective::AnyCollective::parse(names.collective)};
  }

  AnySynchronizer(transport::Transport& t, ModelLayout layout, const PolicyNames& names = {}, Options options = {})
      : Base(t, std::move(layout), std::move(options), parse(names)) {}
  /// From policies parse() returned (the order of Synchronizer's own constructor).
  AnySynchronizer(transport::Transport& t, ModelLayout layout, Options options, Policies policies)
      : Base(t, std::move(layout), std::move(options), std::move(policies)) {}
};

#if defined(GRADSYNC_ANY_LIBRARY)
// Linked to gradsync::any (CMake), which holds the one instantiation of the run-time synchronizer:
// these declarations keep every other translation unit from compiling it again. The library and
// its users must see the same AnyCollective, so the backends it was built with must be these.
static_assert(collective::AnyCollective::backends == std::string_view(GRADSYNC_ANY_LIBRARY),
              "gradsync::any was built with other optional backends (GRADSYNC_WITH_MPI/GLOO/NCCL) than this "
              "target: link the gradsync::any library built with this target's backends (gradsync_any_library() "
              "in cmake/gradsyncAny.cmake), or do not link one");
extern template class Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;
extern template class schedule::Engine<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec,
                                       collective::AnyCollective>;
extern template class schedule::Plan<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec,
                                     collective::AnyCollective>;
#endif

}  // namespace gradsync

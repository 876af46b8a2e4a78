#pragma once
/// The schedule's protocol tags, from transport::schedule_tags (transport/transport.hpp).
#include "../transport/transport.hpp"

namespace gradsync::schedule {

inline constexpr transport::Tag handshake_tag = transport::schedule_tags.at(0);  ///< handshake.hpp: ranks agree
inline constexpr transport::Tag decision_tag = transport::schedule_tags.at(1);   ///< leader.hpp: rank 0's decisions
inline constexpr transport::Tag abort_tag = transport::schedule_tags.at(2);      ///< watchdog.hpp: a failing rank's message
inline constexpr transport::Tag ready_tag = transport::schedule_tags.at(3);      ///< leader.hpp: units ready on a rank

}  // namespace gradsync::schedule

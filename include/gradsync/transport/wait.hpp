#pragma once
/// Wait: a wait for a peer in progress - for whom, and since when. The parts of a synchronizer
/// that wait for peers (transport::Cancellable's receives and sends, the schedule's leader, the
/// parameter server's thread) list theirs, so that schedule::Watchdog can tell whom this rank is
/// stuck on.
#include <chrono>

namespace gradsync::transport {

struct Wait {
  int peer = -1;  ///< the rank waited for; -1: none
  std::chrono::steady_clock::time_point since{};
};

}  // namespace gradsync::transport

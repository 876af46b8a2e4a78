#pragma once
/// SIGPIPE ignored unless the program handles it. Open MPI's TCP btl and Gloo's TCP transport
/// write without MSG_NOSIGNAL, so a write to the socket of a peer that died would kill this rank
/// without a word; ignored, the write fails with EPIPE, which they report and gradsync turns into
/// a PeerError naming the peer, instead of the signal killing the survivors (faults.smoke).
#include <signal.h>

#include <csignal>

namespace gradsync::transport {

/// Ignores SIGPIPE if its action is the default; true when it did.
inline bool ignore_sigpipe_if_default() {
  struct sigaction pipe {};
  return ::sigaction(SIGPIPE, nullptr, &pipe) == 0 && pipe.sa_handler == SIG_DFL &&
         std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}

}  // namespace gradsync::transport

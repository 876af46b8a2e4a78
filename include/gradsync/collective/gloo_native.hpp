#pragma once
/// GlooNative: hands the unit to Gloo's ring all-reduce (libgloo, the library PyTorch DDP uses on
/// CPUs). Gloo's device thread moves the bytes (epoll on its TCP sockets) and the executor sleeps
/// on a condition variable until its unit is summed, where the MPI transport polls MPI_Test.
/// Only for lossless codecs (Gloo adds fp32 values), like MpiNative.
///
/// Gloo keeps its own TCP connections; the synchronizer's transport (any of them: MPI,
/// in-process, ...) only bootstraps them. start() opens a Gloo TCP device on the interface named
/// by `iface` (else the environment's GLOO_SOCKET_IFNAME, as in PyTorch; else the address of the
/// host's name, Gloo's default), sends every peer the address of the pair that waits for it and
/// connects the full mesh. Units pass their tag to Gloo, so they run concurrently. Gloo's errors
/// (gloo::Exception, and gloo::EnforceNotMet, which is not one) become gradsync's. Bytes move
/// outside the synchronizer's transport: a Throttled transport does not shape them.
///
/// \code
///   gradsync::Synchronizer<..., gradsync::codec::Identity, gradsync::collective::GlooNative> sync{transport, layout};
///   // or AnyCollective::parse("gloo") / parse("gloo:eth0")
/// \endcode
#include <gloo/allreduce.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>

#include <net/if.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../transport/sigpipe.hpp"
#include "../transport/transport.hpp"
#include "concept.hpp"
#include "tags.hpp"

namespace gradsync::collective {

namespace detail {

/// A gloo::Context whose pairs find each other through a gradsync transport instead of a Gloo
/// store: each rank sends peer p the address its pair for p listens on, then connects them all.
class GlooMesh : public gloo::Context {
 public:
  GlooMesh(transport::Transport& t, const std::string& iface) : gloo::Context(t.rank(), t.size()) {
    const gloo::transport::tcp::attr attr = device_attr(iface);
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw ConfigError("gradsync: collective 'gloo' could not open a TCP device" +
                        (iface.empty() ? std::string(" on the host name's address") : " on interface '" + iface + "'") +
                        ": " + e.what() + "; name the interface the ranks reach each other on with 'gloo:IFACE' "
                        "or GLOO_SOCKET_IFNAME");
    }
    setTimeout(t.timeout());
    transportContext_ = device_->createContext(rank, size);
    transportContext_->setTimeout(t.timeout());
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      const std::vector<char> mine = transportContext_->createPair(p)->address().bytes();
      t.send(p, gloo_address_tag, std::as_bytes(std::span(mine)));
    }
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      std::vector<char> theirs(gloo::transport::Address::kMaxByteSize);
      theirs.resize(t.recv(p, gloo_address_tag, std::as_writable_bytes(std::span(theirs))));
      try {
        transportContext_->getPair(p)->connect(theirs);
      } catch (const std::exception& e) {
        throw PeerError("gradsync: " + t.describe() + ": collective 'gloo' could not connect to rank " +
                        std::to_string(p) + ": " + e.what() + "; check that the ranks reach each other on the "
                        "interface Gloo chose ('gloo:IFACE' or GLOO_SOCKET_IFNAME name it)");
      }
    }
    // Gloo's connect() returns on one side before the other side's has: a rank that closed its
    // pairs right after start() made a peer's start() fail. No rank leaves until all are connected.
    const std::byte connected{1};
    for (int p = 0; p < size; ++p)
      if (p != rank) t.send(p, gloo_address_tag, std::span(&connected, 1));
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      std::byte got{};
      t.recv(p, gloo_address_tag, std::span(&got, 1));
    }
  }

 private:
  static gloo::transport::tcp::attr device_attr(std::string iface) {
    gloo::transport::tcp::attr attr;
    if (iface.empty())
      if (const char* env = std::getenv("GLOO_SOCKET_IFNAME")) iface = env;
    // Checked here: Gloo's own check throws past its getifaddrs() list, which then leaks.
    if (!iface.empty() && if_nametoindex(iface.c_str()) == 0)
      throw ConfigError("gradsync: collective 'gloo': no network interface '" + iface + "' on this host (" +
                        std::strerror(errno) + "); name the one the ranks reach each other on with 'gloo:IFACE' "
                        "or GLOO_SOCKET_IFNAME (ip -brief address lists them)");
    attr.iface = iface;
    return attr;
  }
};

}  // namespace detail

struct GlooNative {
  /// The network interface Gloo's sockets use; empty: GLOO_SOCKET_IFNAME, else the host name's address.
  std::string iface;

  explicit GlooNative(std::string iface = {}) : iface(std::move(iface)) {}

  std::string_view name() const { return "gloo"; }
  /// Gloo adds fp32 values.
  static constexpr Traits traits() { return {.needs_lossless_codec = true}; }

  /// This rank's Gloo pairs, as its Runtime: they close with the synchronizer that holds them.
  struct Mesh final : Runtime {
    std::shared_ptr<gloo::Context> context;  // Gloo's options hold it shared
  };

  /// Connects this rank's Gloo pairs (collective::Setup); every rank must start together. Ignores
  /// SIGPIPE unless the program handles it (transport/sigpipe.hpp): a peer that stopped fails the
  /// all-reduce instead of killing this rank.
  using State = Mesh;
  std::unique_ptr<State> start(const Setup& setup) const {
    transport::ignore_sigpipe_if_default();
    auto mesh = std::make_unique<Mesh>();
    if (setup.transport.size() > 1) mesh->context = std::make_shared<detail::GlooMesh>(setup.transport, iface);
    return mesh;
  }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace&, State& mesh) const {
    check_accepts(*this, codec);
    const int n = t.size();
    if (n == 1) return 0;  // the unit already is the sum and the mean
    gloo::AllreduceOptions opts(mesh.context);
    opts.setOutput(job.data.data(), job.data.size());
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(job.tag);
    opts.setTimeout(t.timeout());
    try {
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      throw PeerError("gradsync: " + t.describe() + ": Gloo's all-reduce of unit " + std::to_string(job.tag) +
                      " failed: " + e.what() + ": a rank died, stopped synchronizing, or is too slow "
                      "(raise Options::timeout if it is only slow)");
    }
    detail::finish_mean(job.data, job.average, n);
    return detail::ring_bytes(job.data.size_bytes(), n);  // Gloo's ring
  }
};
GRADSYNC_CHECK_COLLECTIVE(GlooNative);

}  // namespace gradsync::collective

#pragma once
/// BestEffort: unreliable, unordered datagrams between the ranks of a job — DGT's low-priority
/// channel for unimportant gradient blocks (collective/differential.hpp). A datagram may be lost,
/// duplicated or reordered; receivers validate everything in it. Udp is the real one: a UDP
/// socket per rank, its packets marked with a low DSCP (CS1, "lower effort") so a network that
/// honours DSCP (a `prio` qdisc, a switch) sends the reliable traffic first.
///
/// \code
///   gradsync::transport::Udp udp(transport);            // collective: ranks exchange addresses over `transport`
///   udp.send(peer, bytes);                              // may be lost
///   if (auto d = udp.try_recv(buffer)) use(d->src, buffer.first(d->bytes));  // src -1: not a peer
/// \endcode
///
/// The address a rank binds and announces: $GRADSYNC_UDP_ADDRESS if set (an IPv4 address), else
/// the first non-loopback IPv4 address of an interface that is up, else 127.0.0.1.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "tags.hpp"
#include "transport.hpp"

namespace gradsync::transport {

class BestEffort {
 public:
  struct Received {
    int src;            ///< the peer's rank, or -1 when the sender is not one of the job's ranks
    std::size_t bytes;  ///< datagram size (at most the buffer's; longer ones are truncated, see Udp)
  };
  virtual ~BestEffort() = default;
  /// Sends `data` to rank `dst` if the network lets it; never waits for the peer.
  virtual void send(int dst, std::span<const std::byte> data) = 0;
  /// The next datagram that has arrived, if any; never waits.
  virtual std::optional<Received> try_recv(std::span<std::byte> out) = 0;
  virtual std::string describe() const = 0;
};

class Udp final : public BestEffort {
 public:
  /// DSCP CS1 ("lower effort", RFC 8622) in the IP TOS byte.
  static constexpr int low_priority_tos = 8 << 2;

  /// Collective over `t` (every rank constructs one): binds a socket and exchanges addresses.
  explicit Udp(Transport& t, int tos = low_priority_tos) : rank_(t.rank()) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    if (fd_ < 0) fail("socket");
    const int buffer = 8 << 20;  // a burst of blocks must not overflow the kernel's queue
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    if (::setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0) fail("setsockopt(IP_TOS)");
    sockaddr_in self{};
    self.sin_family = AF_INET;
    self.sin_addr = local_address();
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&self), sizeof self) != 0) fail("bind");
    socklen_t len = sizeof self;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&self), &len);
    peers_.assign(static_cast<std::size_t>(t.size()), sockaddr_in{});
    peers_[static_cast<std::size_t>(rank_)] = self;
    const auto mine = std::as_bytes(std::span(&self, 1));
    for (int p = 0; p < t.size(); ++p)
      if (p != rank_) t.send(p, udp_address_tag, mine);
    for (int p = 0; p < t.size(); ++p)
      if (p != rank_ && t.recv(p, udp_address_tag, std::as_writable_bytes(std::span(&peers_[static_cast<std::size_t>(p)], 1))) !=
                            sizeof(sockaddr_in))
        throw PeerError("gradsync: rank " + std::to_string(p) + " sent a malformed UDP address");
  }
  Udp(const Udp&) = delete;
  Udp& operator=(const Udp&) = delete;
  ~Udp() override { ::close(fd_); }

  void send(int dst, std::span<const std::byte> data) override {
    const sockaddr_in& to = peers_.at(static_cast<std::size_t>(dst));
    // Best effort: a full socket buffer or an unreachable peer loses the datagram, as the network may.
    (void)::sendto(fd_, data.data(), data.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
  std::optional<Received> try_recv(std::span<std::byte> out) override {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const ssize_t n = ::recvfrom(fd_, out.data(), out.size(), MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return std::nullopt;
      fail("recvfrom");
    }
    int src = -1;
    for (std::size_t p = 0; p < peers_.size(); ++p)
      if (peers_[p].sin_addr.s_addr == from.sin_addr.s_addr && peers_[p].sin_port == from.sin_port) src = static_cast<int>(p);
    return Received{src, static_cast<std::size_t>(n)};  // n > out.size(): truncated, and the size says so
  }
  std::string describe() const override {
    const sockaddr_in& self = peers_[static_cast<std::size_t>(rank_)];
    char ip[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &self.sin_addr, ip, sizeof ip);
    return "UDP " + std::string(ip) + ":" + std::to_string(ntohs(self.sin_port)) + " (rank " + std::to_string(rank_) + ")";
  }

 private:
  static in_addr local_address() {
    in_addr a{};
    if (const char* env = std::getenv("GRADSYNC_UDP_ADDRESS")) {
      if (::inet_pton(AF_INET, env, &a) != 1)
        throw ConfigError("gradsync: GRADSYNC_UDP_ADDRESS='" + std::string(env) + "' is not an IPv4 address");
      return a;
    }
    a.s_addr = htonl(INADDR_LOOPBACK);
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return a;
    for (ifaddrs* i = list; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
        a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
        break;
      }
    ::freeifaddrs(list);
    return a;
  }
  [[noreturn]] static void fail(const char* call) {
    throw PeerError(std::string("gradsync: UDP ") + call + " failed: " + std::strerror(errno));
  }

  int fd_ = -1;
  int rank_;
  std::vector<sockaddr_in> peers_;
};

}  // namespace gradsync::transport

#pragma once
/// The transports' own tags, from transport_tags (transport/transport.hpp).
#include "transport.hpp"

namespace gradsync::transport {

inline constexpr Tag nccl_bootstrap_tag = transport_tags.at(0);  ///< rank 0's NCCL unique id (Nccl)
inline constexpr Tag udp_address_tag = transport_tags.at(1);     ///< Datagram's exchange of UDP addresses

}  // namespace gradsync::transport

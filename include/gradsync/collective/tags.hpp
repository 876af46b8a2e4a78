#pragma once
/// The collectives' own tags, from transport::collective_tags (transport/transport.hpp).
#include "../transport/transport.hpp"

namespace gradsync::collective {

inline constexpr transport::Tag gloo_address_tag = transport::collective_tags.at(0);  ///< GlooNative's pair addresses

}  // namespace gradsync::collective

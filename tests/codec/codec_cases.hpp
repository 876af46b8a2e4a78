#pragma once
// Codec configurations shared by the wire tests and the fuzz target: every codec, odd bucket
// options, and the defaults (the bypass knob is the Synchronizer's, per tensor: codecs encode
// every message with any of these).
#include <array>
#include <string_view>

#include <gradsync/codec/any.hpp>

namespace codec_cases {

inline constexpr std::array<std::string_view, 18> specs = {
    "fp32",          "fp16:bypass=0",   "bf16:bypass=0",       "qsgd2:bypass=0",
    "qsgd4:bypass=0", "qsgd8:bypass=0", "qsgd16:bypass=0",     "qsgd8:bucket=128:norm=l2:bypass=0",
    "onebit:bypass=0", "onebit:bucket=32:bypass=0", "topk:bypass=0", "topk:0.25:bypass=0",
    "ef+qsgd2:bypass=0", "ef+fp16:bypass=0", "qsgd4",          "onebit",
    "topk",          "fp16:bypass=100",
};

inline gradsync::codec::AnyCodec make(std::string_view spec) { return gradsync::codec::AnyCodec::parse(spec); }

}  // namespace codec_cases

#pragma once
/// 16-byte loads and stores for the device codecs (LDG.E.128 / STG.E.128 on a GPU; a plain copy
/// on the host, where the host twins run the very same step functions), and the guarded quads of
/// four consecutive floats every device codec works in.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../codec/detail/kernel.hpp"

namespace gradsync::cuda::detail {

/// The vector paths' precondition, checked on the host before a launch.
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Four floats from / to a 16-byte aligned address. Once: data a pass touches once (the narrow
/// codecs' streams), loaded and stored evict-first (ld/st.global.cs), so it does not push out
/// what other passes re-read from L2.
template <bool Once = false>
GRADSYNC_HD inline void load4(const float* p, float* x) {
#ifdef __CUDA_ARCH__
  const float4 v = Once ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
  x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
#else
  std::memcpy(x, p, 16);
#endif
}
template <bool Once = false>
GRADSYNC_HD inline void store4(float* p, const float* x) {
#ifdef __CUDA_ARCH__
  const float4 v = make_float4(x[0], x[1], x[2], x[3]);
  if (Once) __stcs(reinterpret_cast<float4*>(p), v);
  else *reinterpret_cast<float4*>(p) = v;
#else
  std::memcpy(p, x, 16);
#endif
}
/// Four 32-bit words from / to a 16-byte aligned address.
template <bool Once = false>
GRADSYNC_HD inline void load4(const std::byte* p, std::uint32_t* w) {
#ifdef __CUDA_ARCH__
  const uint4 v = Once ? __ldcs(reinterpret_cast<const uint4*>(p)) : *reinterpret_cast<const uint4*>(p);
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
#else
  std::memcpy(w, p, 16);
#endif
}
template <bool Once = false>
GRADSYNC_HD inline void store4(std::byte* p, const std::uint32_t* w) {
#ifdef __CUDA_ARCH__
  const uint4 v = make_uint4(w[0], w[1], w[2], w[3]);
  if (Once) __stcs(reinterpret_cast<uint4*>(p), v);
  else *reinterpret_cast<uint4*>(p) = v;
#else
  std::memcpy(p, w, 16);
#endif
}

/// Elements i..i+3 of p, zeros from n on: one 16-byte load when `vector` (p 16-byte aligned, i a
/// multiple of 4) and the quad is whole, else one element at a time.
template <bool Once = false>
GRADSYNC_HD inline void load_quad(const float* p, std::size_t i, std::size_t n, bool vector, float* x) {
  if (vector && i + 4 <= n) {
    load4<Once>(p + i, x);
  } else {
    for (std::size_t c = 0; c < 4; ++c) x[c] = i + c < n ? p[i + c] : 0.0f;
  }
}
/// Stores elements i..i+3 (those below n) of p.
template <bool Once = false>
GRADSYNC_HD inline void store_quad(float* p, std::size_t i, std::size_t n, bool vector, const float* x) {
  if (vector && i + 4 <= n) {
    store4<Once>(p + i, x);
  } else {
    for (std::size_t c = 0; c < 4 && i + c < n; ++c) p[i + c] = x[c];
  }
}

}  // namespace gradsync::cuda::detail

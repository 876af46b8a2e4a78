#pragma once
/// OnDevice<C, Space>: codec C for units that live in device memory, with the wire in host memory
/// (a transport that is not CUDA-aware carries it: Debian's Open MPI, the in-process one). Encode
/// runs C's device encode into scratch device memory and copies the wire form, compressed, to the
/// host in one copy; decode and decode_add copy the received wire to the device in one copy and
/// decode there. Gradients never leave the device. Units in any other memory go through C on the
/// host, so one Synchronizer type serves both.
///
/// Being a type of its own, it never takes a collective's raw-fp32 path (collective/wire.hpp):
/// Ring, ReduceBroadcast, ParameterServer, Hierarchical and Hybrid run unchanged through their
/// codec steps, and the Synchronizer sends the library's other host steps (the mean, the NaN
/// check, fp32 units) here through the DeviceCodec hooks (codec/memory.hpp). The wire is C's:
/// a rank with OnDevice<C> and a rank with C interoperate byte for byte.
///
/// \code
///   using Sync = gradsync::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                                       gs::cuda::OnDevice<gs::codec::Qsgd<8>>,   // cuda/on_device.cuh
///                                       gs::collective::Ring>;
///   sync.gradient_ready(layer, std::span<float>(d_grad, n));  // after the kernels that wrote it
/// \endcode
///
/// A Space does the device work (cuda::Device; the tests' host twin). Every step is complete when
/// it returns: a unit passes between threads (executor, parameter-server thread, the caller) only
/// through the host's synchronization.
///   bool holds(const void* p) const;                        // p is device memory
///   std::span<std::byte> scratch(std::size_t bytes) const;  // device bytes of the calling thread
///   void to_host(std::span<std::byte> host, std::span<const std::byte> device) const;
///   void to_device(std::span<std::byte> device, std::span<const std::byte> host) const;
///   template <class C> std::size_t encode(const C&, std::span<const float>, std::span<std::byte>,
///                                         const EncodeContext&) const;  // device in, device out
///   template <class C> void decode(const C&, std::span<const std::byte>, std::span<float>, bool add) const;
///   template <class F> void for_each(std::size_t n, const F& f) const;        // f(i), i < n
///   template <class P> std::size_t find_if(std::size_t n, const P& p) const;  // first i with p(i), or n
///
/// \tparam C      the codec whose wire format travels (codec::Codec; AnyCodec too)
/// \tparam Space  where the device work happens
#include <concepts>
#include <span>
#include <string>

#include "concept.hpp"
#include "identity.hpp"
#include "memory.hpp"

namespace gradsync::codec {

template <Codec C, class Space>
struct OnDevice {
  C inner{};  ///< the codec: its wire, its traits
  Space space{};

  constexpr std::string_view name() const { return inner.name(); }
  constexpr Traits traits() const { return inner.traits(); }
  constexpr std::size_t encoded_bytes(std::size_t n) const { return inner.encoded_bytes(n); }

  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext& ctx) const {
    if (!space.holds(in.data())) return inner.encode(in, out, ctx);
    if (!ctx.residual.empty() && !space.holds(ctx.residual.data()))
      throw UsageError("gradsync: " + std::string(name()) + " on the device needs its residual in device memory too");
    const std::span<std::byte> wire = space.scratch(inner.encoded_bytes(in.size()));
    const std::size_t bytes = space.encode(inner, in, wire, ctx);
    if (out.size() < bytes)
      throw UsageError("gradsync: " + std::string(name()) + " encode needs an output of encoded_bytes(n) bytes");
    space.to_host(out.first(bytes), wire.first(bytes));
    return bytes;
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const { decode(wire, out, false); }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const { decode(wire, acc, true); }

  // ---- DeviceCodec (codec/memory.hpp) ----
  bool device_memory(const void* p) const { return space.holds(p); }
  void divide(std::span<float> data, int ranks) const {
    space.for_each(data.size(), detail::DivideKernel{data.data(), static_cast<float>(ranks)});
  }
  std::optional<NonFinite> first_non_finite(std::span<const float> data) const {
    const std::size_t i = space.find_if(data.size(), detail::NonFiniteAt{data.data()});
    if (i == data.size()) return std::nullopt;
    float value;
    space.to_host(std::as_writable_bytes(std::span(&value, 1)), std::as_bytes(data.subspan(i, 1)));
    return NonFinite{i, value};
  }
  /// fp32 on the wire from the same memory; the same type when C holds codec::Identity (AnyCodec),
  /// so a runtime codec adds no second instantiation of the collectives.
  auto fp32() const {
    if constexpr (std::constructible_from<C, Identity>) return OnDevice{C(Identity{}), space};
    else return OnDevice<Identity, Space>{{}, space};
  }

 private:
  void decode(std::span<const std::byte> wire, std::span<float> out, bool add) const {
    if (!space.holds(out.data())) return add ? inner.decode_add(wire, out) : inner.decode(wire, out);
    const std::span<std::byte> on_device = space.scratch(wire.size());
    space.to_device(on_device, wire);
    space.decode(inner, on_device, out, add);
  }
};

}  // namespace gradsync::codec

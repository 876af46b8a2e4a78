// The device codecs for every runtime codec (AnyCodec dispatches to each concrete one), compiled
// once here; codec.cuh declares them extern for targets that link gradsync::cuda_codecs.
#include <gradsync/cuda/codec.cuh>

namespace gradsync::cuda {
template std::size_t encode(const codec::AnyCodec&, std::span<const float>, std::span<std::byte>,
                            const codec::EncodeContext&, cudaStream_t);
template void decode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, WireStatus&, cudaStream_t);
template void decode_add(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, WireStatus&, cudaStream_t);
template std::size_t decode_add_encode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>,
                                       std::span<std::byte>, const codec::EncodeContext&, WireStatus&, cudaStream_t,
                                       std::uint32_t);
template void decode(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
template void decode_add(const codec::AnyCodec&, std::span<const std::byte>, std::span<float>, cudaStream_t);
}  // namespace gradsync::cuda

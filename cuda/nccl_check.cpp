// Compile-only: transport::Nccl, collectives NcclNative and NcclHierarchical and AnyCollective
// ("nccl", "nccl-hierarchical") instantiated for the codecs they accept, so CI (no GPU) proves the NCCL code builds. Run on a GPU: tests/cuda.
#include <gradsync/codec/any.hpp>
#include <gradsync/collective/any.hpp>
#include <gradsync/transport/nccl.hpp>

namespace gradsync::collective {
template std::size_t NcclNative::run(transport::Transport&, const codec::Identity&, Job&, Workspace&) const;
template std::size_t NcclHierarchical::run(transport::Transport&, const codec::Qsgd<8>&, Job&, Workspace&) const;
template std::size_t AnyCollective::run(transport::Transport&, const codec::AnyCodec&, Job&, Workspace&) const;
}  // namespace gradsync::collective

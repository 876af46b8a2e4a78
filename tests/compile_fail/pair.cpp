// ok: a collective that sums fp32 in a vendor library with a lossless codec; ko: with QSGD, which
// such a collective cannot take (collective::Accepts).
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
/// Stands for MpiNative / NcclNative (which need MPI or NCCL to build): the same declaration.
struct SumsFp32 {
  static constexpr gs::collective::Traits traits() { return {.needs_lossless_codec = true}; }
  std::string_view name() const { return "vendor"; }
  template <gs::codec::Codec C>
  std::size_t run(gs::transport::Transport&, const C&, gs::collective::Job&, gs::collective::Workspace&) const {
    return 0;
  }
};
#ifdef GRADSYNC_FAILTEST_KO
using C = gs::codec::Qsgd<8>;
#else
using C = gs::codec::Identity;
#endif
int main() { return sizeof(gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::Fifo, C, SumsFp32>) == 0; }

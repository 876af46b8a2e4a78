// ok: a user's collective with every member of the Collective concept; ko: the same collective
// without its traits declaration.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct Mine {
#ifndef GRADSYNC_FAILTEST_KO
  static constexpr gs::collective::Traits traits() { return gs::collective::Ring::traits(); }
#endif
  std::string_view name() const { return "mine"; }
  template <gs::codec::Codec C>
  std::size_t run(gs::transport::Transport& t, const C& c, gs::collective::Job& job, gs::collective::Workspace& ws) const {
    return gs::collective::Ring{}.run(t, c, job, ws);
  }
};
int main() { return sizeof(gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::Fifo, gs::codec::Identity, Mine>) == 0; }

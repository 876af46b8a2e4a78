// ok: a user's collective that declares its traits; ko: the same collective with a holds_back
// constant of its own besides, which nothing reads (its traits() counts), so it is refused rather
// than ignored.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct Mine {
  static constexpr gs::collective::Traits traits() { return gs::collective::Ring::traits(); }
#ifdef GRADSYNC_FAILTEST_KO
  static constexpr bool holds_back = true;
#endif
  std::string_view name() const { return "mine"; }
  template <gs::codec::Codec C>
  std::size_t run(gs::transport::Transport& t, const C& c, gs::collective::Job& job, gs::collective::Workspace& ws) const {
    return gs::collective::Ring{}.run(t, c, job, ws);
  }
};
int main() { return sizeof(gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::Fifo, gs::codec::Identity, Mine>) == 0; }

// ok: a real slicing; ko: plan() returns the wrong type.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct NotASlicing {
  int plan(const gs::ModelLayout&) const { return 0; }
  std::string describe() const { return "mine"; }
};
#ifdef GRADSYNC_FAILTEST_KO
using S = NotASlicing;
#else
using S = gs::slicing::WholeLayer;
#endif
int main() { return sizeof(gs::Synchronizer<S, gs::priority::Fifo, gs::codec::Identity, gs::collective::Ring>) == 0; }

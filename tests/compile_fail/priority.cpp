// ok: a real priority; ko: no levels().
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct NotAPriority {
  std::uint32_t key(const gs::Unit&) const { return 0; }
  std::string_view name() const { return "mine"; }
};
#ifdef GRADSYNC_FAILTEST_KO
using P = NotAPriority;
#else
using P = gs::priority::ForwardOrder;
#endif
int main() { return sizeof(gs::Synchronizer<gs::slicing::WholeLayer, P, gs::codec::Identity, gs::collective::Ring>) == 0; }

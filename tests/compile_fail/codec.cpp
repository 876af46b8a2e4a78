// ok: a real codec; ko: a type that only has a name.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct NotACodec {
  std::string_view name() const { return "mine"; }
};
#ifdef GRADSYNC_FAILTEST_KO
using C = NotACodec;
#else
using C = gs::codec::Identity;
#endif
int main() { return sizeof(gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::Fifo, C, gs::collective::Ring>) == 0; }

// ok: a real collective; ko: run() has the wrong signature.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct NotACollective {
  static constexpr gs::collective::Traits traits() { return {}; }
  std::string_view name() const { return "mine"; }
  void run(std::span<float>) const {}
};
#ifdef GRADSYNC_FAILTEST_KO
using K = NotACollective;
#else
using K = gs::collective::ParameterServer;
#endif
int main() { return sizeof(gs::Synchronizer<gs::slicing::WholeLayer, gs::priority::Fifo, gs::codec::Identity, K>) == 0; }

// ok: a layer's last tag; ko: one past its range (transport::TagRange::at checks at compile time),
// which would be the next layer's first.
#include <gradsync/transport/transport.hpp>
namespace gs = gradsync;
#ifdef GRADSYNC_FAILTEST_KO
constexpr gs::transport::Tag i = gs::transport::schedule_tags.count;
#else
constexpr gs::transport::Tag i = gs::transport::schedule_tags.count - 1;
#endif
constexpr gs::transport::Tag tag = gs::transport::schedule_tags.at(i);
int main() { return tag == gs::transport::last_reserved_tag ? 0 : 1; }

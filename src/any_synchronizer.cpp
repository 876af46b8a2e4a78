// gradsync::any: the run-time synchronizer (AnySynchronizer) compiled once, for the backends this
// library is built with (GRADSYNC_ANY_LIBRARY names them; cmake/gradsyncAny.cmake). Programs that
// link it get any_synchronizer.hpp's explicit instantiation declarations instead of compiling
// the engine, every collective and every codec themselves.
#include <gradsync/any_synchronizer.hpp>

namespace gradsync {

template class Synchronizer<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;
template class schedule::Engine<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;
template class schedule::Plan<slicing::AnySlicing, priority::AnyPriority, codec::AnyCodec, collective::AnyCollective>;

}  // namespace gradsync

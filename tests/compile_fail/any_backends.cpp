// ok: a program with the optional backends its gradsync::any library was built with (none here);
// ko: one linked to a library built with MPI (GRADSYNC_ANY_LIBRARY="mpi,") while the program has
// no GRADSYNC_WITH_MPI, so it would see another AnyCollective: refused at compile time.
#ifdef GRADSYNC_FAILTEST_KO
#define GRADSYNC_ANY_LIBRARY "mpi,"
#else
#define GRADSYNC_ANY_LIBRARY ""
#endif
#include <gradsync/any_synchronizer.hpp>

int main() { return 0; }

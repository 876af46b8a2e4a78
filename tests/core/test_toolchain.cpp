// The compiler itself: GCC 12 with AVX-512 stored constant initializers wrong (CMakeLists.txt
// turns AVX-512 off there); a build that brings the bug back fails here, naming it, rather than
// in whichever test happens to build such a vector.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace {
template <class T>
__attribute__((noinline)) std::vector<T> copy(const std::vector<T>& v) {
  return v;
}
}  // namespace

TEST_CASE("the compiler stores constant initializers as written (GCC 12 + AVX-512 broadcast the first lane)") {
  const auto ints = copy(std::vector<int>{9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(ints[4] == 0);
  CHECK(ints[15] == 0);
  const auto floats = copy(std::vector<float>{5, 5, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(floats[15] == 0.0f);
  const auto shorts = copy(std::vector<std::int16_t>{9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(shorts[8] == 0);
}

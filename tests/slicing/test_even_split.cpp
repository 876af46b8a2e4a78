// slicing/even_split.hpp: MXNet KVStore's sharding (P3's baseline)
#include <catch2/catch.hpp>

#include <gradsync/slicing/any.hpp>

#include "support/ranks.hpp"

using namespace gradsync;

TEST_CASE("EvenSplit cuts layers from the bound into equal parts and keeps smaller ones whole") {
  // VGG-19's fc6 (102,760,448) and a 3x3x512x512 convolution (2,359,296) are split; its first
  // convolution (1,728) and a bias (4,096) are not.
  const ModelLayout layout{{"conv1.weight", 1728}, {"conv.weight", 2'359'296}, {"fc6.weight", 102'760'448},
                           {"fc6.bias", 4096}};
  const auto units = slicing::EvenSplit{}.plan(layout);
  std::vector<std::pair<std::uint32_t, std::size_t>> got;  // (layer, elements) per unit
  for (const Unit& u : units) {
    REQUIRE(u.segments.size() == 1);
    got.emplace_back(u.segments[0].layer, u.elements);
  }
  const std::vector<std::pair<std::uint32_t, std::size_t>> want{
      {0, 1728},       {1, 589'824},    {1, 589'824},    {1, 589'824}, {1, 589'824},
      {2, 25'690'112}, {2, 25'690'112}, {2, 25'690'112}, {2, 25'690'112}, {3, 4096}};
  REQUIRE(got == want);

  // A layer that does not divide evenly: the last part is the shorter one.
  const auto odd = slicing::EvenSplit{.parts = 3, .min_elements = 10}.plan(ModelLayout{{"w", 11}, {"b", 9}});
  REQUIRE(odd.size() == 4);
  CHECK(odd[0].elements == 4);
  CHECK(odd[2].elements == 3);
  CHECK(odd[3].elements == 9);
}

TEST_CASE("EvenSplit from a string: split[:P[:N]]") {
  CHECK(slicing::AnySlicing::parse("split").describe() == "split:4:1000000");
  const auto e = std::get<slicing::EvenSplit>(slicing::AnySlicing::parse("split:8:64k").policy);
  CHECK(e.parts == 8);
  CHECK(e.min_elements == 64'000);
  for (const char* bad : {"split:", "split:0", "split:4:", "split:4:0", "split:x"}) {
    INFO(bad);
    CHECK_THROWS_AS(slicing::AnySlicing::parse(bad), ConfigError);
  }
  CHECK(slicing::AnySlicing::parse(slicing::AnySlicing::parse("split:3:500").describe()).describe() == "split:3:500");
}

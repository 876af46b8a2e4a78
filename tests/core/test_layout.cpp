#include <catch2/catch.hpp>

#include <gradsync/core/layout.hpp>

using gradsync::ModelLayout;

TEST_CASE("ModelLayout keeps layers in forward order and counts elements") {
  ModelLayout l{{"a", 3}, {"b", 1}, {"c", 10}};
  REQUIRE(l.num_layers() == 3);
  REQUIRE(l.layer(0).name == "a");
  REQUIRE(l.layer(2).elements == 10);
  REQUIRE(l.total_elements() == 14);
}

TEST_CASE("ModelLayout signature tells layouts apart") {
  const ModelLayout a{{"a", 3}, {"b", 1}};
  REQUIRE(a.signature() == ModelLayout({{"a", 3}, {"b", 1}}).signature());
  REQUIRE(a.signature() != ModelLayout({{"a", 3}, {"b", 2}}).signature());
  REQUIRE(a.signature() != ModelLayout({{"b", 1}, {"a", 3}}).signature());
  REQUIRE(a.signature() != ModelLayout({{"a", 3}, {"c", 1}}).signature());
}

TEST_CASE("ModelLayout rejects empty layouts and empty layers") {
  REQUIRE_THROWS_AS(ModelLayout(std::vector<gradsync::LayerSpec>{}), gradsync::UsageError);
  REQUIRE_THROWS_WITH(ModelLayout({{"a", 3}, {"empty", 0}}), Catch::Contains("'empty'") && Catch::Contains("0 elements"));
}

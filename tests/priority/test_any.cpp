// priority/any.hpp: runtime priority from a string
#include <catch2/catch.hpp>

#include <gradsync/priority/any.hpp>

using namespace gradsync;

TEST_CASE("AnyPriority parses and rejects") {
  REQUIRE(priority::AnyPriority::parse("forward").name() == "forward");
  REQUIRE(priority::AnyPriority::parse("fifo").name() == "fifo");
  REQUIRE_THROWS_WITH(priority::AnyPriority::parse("p3"), Catch::Contains("'p3'") && Catch::Contains("fifo, forward"));
}

TEST_CASE("AnyPriority: DGT's old spelling names the new one") {
  for (const char* old : {"dgt", "dgt:alpha=0.5:block=64"})
    REQUIRE_THROWS_WITH(priority::AnyPriority::parse(old),
                        Catch::Contains("is now collective '" + std::string(old) + "'") &&
                            Catch::Contains("use priority 'forward' and collective 'dgt"));
}

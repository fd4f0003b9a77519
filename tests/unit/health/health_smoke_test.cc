#include <catch2/catch.hpp>
TEST_CASE("health library links", "[health]") { SUCCEED(); }

#include <catch2/catch.hpp>
TEST_CASE("config library links", "[config]") { SUCCEED(); }

#include "common/json.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace geogate::common {
namespace {

namespace json = boost::json;

TEST_CASE("doubles are written in the shortest exact form, not Boost.JSON's", "[json]") {
  // What Boost.JSON 1.81 alone writes, and why common/json.h exists.
  CHECK(json::serialize(json::value(0.7)) == "7E-1");
  json::array a{0.7, 3.0, 0.46875, 0.00032421875, 1e-05, 0.0, -2.5, 1e21};
  CHECK(SerializeJson(a) == "[0.7,3,0.46875,0.00032421875,1e-05,0,-2.5,1e+21]");
  // JSON has no NaN or infinity: they are written as 0, so the text stays JSON.
  json::array odd{std::nan(""), std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity()};
  CHECK(SerializeJson(odd) == "[0,0,0]");
  std::string csv;
  AppendJsonNumber(csv, 0.2);
  csv += ',';
  AppendJsonNumber(csv, 64.0);
  CHECK(csv == "0.2,64");
}

TEST_CASE("members keep their order; integers, bools and null are Boost.JSON's", "[json]") {
  json::object o{{"z", 1},
                 {"a", json::array{true, false, nullptr, "x"}},
                 {"m", json::object{{"d", 0.25}, {"e", json::object{}}, {"f", json::array{}}}},
                 {"min", std::numeric_limits<int64_t>::min()},
                 {"max", std::numeric_limits<uint64_t>::max()}};
  CHECK(SerializeJson(o) == R"({"z":1,"a":[true,false,null,"x"],"m":{"d":0.25,"e":{},"f":[]},)"
                            R"("min":-9223372036854775808,"max":18446744073709551615})");
  CHECK(SerializeJson(json::value(o)) == SerializeJson(o));
  CHECK(SerializeJson(json::value(nullptr)) == "null");
}

TEST_CASE("strings and keys are escaped into JSON that reads back the same", "[json]") {
  CHECK(SerializeJson(json::object{{"k\"", "a\"b\\c\n\t"}}) == R"({"k\"":"a\"b\\c\n\t"})");
  std::string all;
  for (int c = 1; c < 0x80; ++c)
    all += static_cast<char>(c);
  all += "\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82";  // é 日本 🙂, as UTF-8
  std::string text = SerializeJson(json::object{{all, all}});
  json::value back = json::parse(text);
  REQUIRE(back.is_object());
  REQUIRE(back.as_object().size() == 1);
  const json::key_value_pair& kv = *back.as_object().begin();
  CHECK(std::string(kv.key()) == all);
  CHECK(std::string(kv.value().as_string()) == all);
  for (char c : text)
    CHECK(static_cast<unsigned char>(c) != '\n');  // one line
}

}  // namespace
}  // namespace geogate::common

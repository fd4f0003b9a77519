#include <catch2/catch.hpp>

#include <charconv>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>

#include "common/json_text.h"

using namespace geogate::common;
namespace json = boost::json;

namespace {

// Appends `s` as a JSON string literal, the way the access log writes one:
// into room for JsonStringBound(s), then trimmed to what was written.
void AppendJsonString(std::string& out, std::string_view s) {
  size_t old = out.size();
  out.resize(old + JsonStringBound(s));
  char* end = WriteJsonString(out.data() + old, s);
  out.resize(static_cast<size_t>(end - out.data()));
}

}  // namespace

TEST_CASE("JSON string escaping round-trips every byte and keeps clean runs whole", "[json_text]") {
  std::string all;
  for (int c = 1; c < 256; ++c)
    all.push_back(static_cast<char>(c));
  all += "\xc3\xa9 UTF-8 stays as it is";
  std::string out = "prefix:";
  AppendJsonString(out, all);
  REQUIRE(out.rfind("prefix:\"", 0) == 0);
  // Bytes >= 0x80 are not valid UTF-8 on their own: compare the 7-bit part
  // through a parser, and the rest byte for byte.
  std::string ascii(all.begin(), all.begin() + 127);
  std::string ascii_out;
  AppendJsonString(ascii_out, ascii);
  CHECK(json::parse(ascii_out).as_string() == ascii);
  CHECK(out.find("\\u0001") != std::string::npos);
  CHECK(out.find("\\u001f") != std::string::npos);
  CHECK(out.find("\\n") != std::string::npos);
  CHECK(out.find("\xc3\xa9 UTF-8 stays as it is\"") != std::string::npos);

  std::string plain;
  AppendJsonString(plain, "eu-west-l4-1");
  CHECK(plain == "\"eu-west-l4-1\"");
  std::string empty;
  AppendJsonString(empty, "");
  CHECK(empty == "\"\"");
  std::string edges;
  AppendJsonString(edges, "\"a\\");
  CHECK(edges == R"("\"a\\")");
}

TEST_CASE("JSON string escaping finds a special byte at any place in a word", "[json_text]") {
  // WriteJsonString checks eight bytes at a time: put each kind of byte at
  // every offset of strings longer and shorter than a word, and compare with
  // the escape written byte by byte.
  auto reference = [](std::string_view s) {
    std::string out = "\"";
    for (unsigned char u : s) {
      if (u == '"' || u == '\\') {
        out += '\\';
        out += static_cast<char>(u);
      } else if (u == '\n') {
        out += "\\n";
      } else if (u == '\r') {
        out += "\\r";
      } else if (u == '\t') {
        out += "\\t";
      } else if (u < 0x20) {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\u00";
        out += kHex[u >> 4];
        out += kHex[u & 0xf];
      } else {
        out += static_cast<char>(u);
      }
    }
    return out + "\"";
  };
  const char specials[] = {'"',    '\\',   '\n',   '\x01', '\x1f', '\x20', '\x21',
                           '\x5b', '\x5d', '\x7f', '\x80', '\xff', 'a'};
  for (size_t len = 1; len <= 27; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (char c : specials) {
        std::string s(len, 'x');
        s[pos] = c;
        if (pos + 9 < len) s[pos + 9] = '"';  // a second one in a later word
        std::string out(JsonStringBound(s), '\0');
        out.resize(static_cast<size_t>(WriteJsonString(out.data(), s) - out.data()));
        INFO("len " << len << " pos " << pos << " byte " << static_cast<int>(c));
        REQUIRE(out == reference(s));
      }
    }
  }
}

TEST_CASE("fixed-point numbers are printf's text", "[json_text]") {
  // WriteFixed takes an integer shortcut when it cannot round differently
  // from std::to_chars (printf's "%.Nf"); compare them on values of every
  // magnitude, on exact ties and next to them.
  auto fixed = [](double v, int digits) {
    char buf[80];
    return std::string(buf, geogate::common::WriteFixed(buf, v, digits));
  };
  auto reference = [](double v, int digits) {
    char buf[80];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
    return std::string(buf, r.ptr);
  };
  std::mt19937_64 rng(20261201);
  std::vector<double> values = {0.0,    -0.0,      0.5,          1.5,  2.5,      0.125, 0.0005,
                                1.0005, 2.675,     1873.54321,   41.2, 999.9995, 1e-9,  123456789.5,
                                9.5e8,  0.0292734, 0.0000202512, 1e12, -3.25};
  for (int i = 0; i < 20000; ++i) {
    double mag = std::pow(10.0, std::uniform_real_distribution<double>(-9, 10)(rng));
    values.push_back(std::uniform_real_distribution<double>(0, mag)(rng));
  }
  for (int n = 0; n < 2000; ++n) {  // exact ties k/2^j and their neighbours
    double tie = static_cast<double>(n) / 8 + 1.0 / 16;
    values.push_back(tie);
    values.push_back(std::nextafter(tie, 0.0));
    values.push_back(std::nextafter(tie, 1e9));
  }
  for (double v : values)
    for (int digits = 0; digits <= 8; ++digits) {
      INFO(v << " with " << digits << " digits");
      REQUIRE(fixed(v, digits) == reference(v, digits));
    }
  CHECK(fixed(1e70, 3) == "0");  // past what a duration or a price can be
}

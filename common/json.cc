#include "common/json.h"

#include <charconv>
#include <cmath>

#include <boost/json/serialize.hpp>

namespace geogate::common {

namespace json = boost::json;

namespace {

void Append(std::string& out, const json::value& v);

void AppendObject(std::string& out, const json::object& o) {
  out += '{';
  bool first = true;
  for (const json::key_value_pair& kv : o) {
    if (!first) out += ',';
    first = false;
    out += json::serialize(kv.key());
    out += ':';
    Append(out, kv.value());
  }
  out += '}';
}

void AppendArray(std::string& out, const json::array& a) {
  out += '[';
  bool first = true;
  for (const json::value& e : a) {
    if (!first) out += ',';
    first = false;
    Append(out, e);
  }
  out += ']';
}

// Only the containers are walked, to reach the doubles in them; every
// other scalar is Boost.JSON's own text.
void Append(std::string& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::object:
      return AppendObject(out, v.get_object());
    case json::kind::array:
      return AppendArray(out, v.get_array());
    case json::kind::double_:
      return AppendJsonNumber(out, v.get_double());
    default:
      out += json::serialize(v);
  }
}

}  // namespace

std::string SerializeJson(const json::value& v) {
  std::string out;
  Append(out, v);
  return out;
}

std::string SerializeJson(const json::object& o) {
  std::string out;
  AppendObject(out, o);
  return out;
}

std::string SerializeJson(const json::array& a) {
  std::string out;
  AppendArray(out, a);
  return out;
}

void AppendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace geogate::common

// JSON documents: built as boost::json values and written by SerializeJson,
// the one road for every JSON text geogate produces except the access log
// (hot: observability/access_log.cc, with json_text.h).
#pragma once

#include <string>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace geogate::common {

/// boost::json::serialize, except for the text of doubles: Boost.JSON 1.81
/// writes 0.7 as "7E-1" and 3.0 as "3E0". Here a double is written as
/// AppendJsonNumber writes it. Member order is the object's (insertion
/// order); strings are escaped by Boost.JSON.
std::string SerializeJson(const boost::json::value& v);
std::string SerializeJson(const boost::json::object& o);
std::string SerializeJson(const boost::json::array& a);

/// The text of a JSON number for `v`: the shortest that reads back as the
/// same double (std::to_chars: "0.1", "2.49", "3", "1e-05"); NaN and
/// infinities, which JSON cannot hold, as 0. The showback CSV uses it too,
/// so both formats agree digit for digit.
void AppendJsonNumber(std::string& out, double v);

}  // namespace geogate::common

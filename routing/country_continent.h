// Continent of a country, for databases that carry only a country code
// (ip-location-db, GeoIP2-Country-shaped exports without `continent`).
#pragma once

#include <string_view>

namespace geogate::routing {

/// @param iso2 an ISO 3166-1 alpha-2 code, either case ("DE", "de"); also
///        "XK" (Kosovo), which MaxMind and most geo databases use.
/// @return the continent code as GeoIP2 uses it: "AF", "AN", "AS", "EU",
///         "NA", "OC" or "SA"; nullptr for anything that is not a country
///         code. Follows GeoNames/MaxMind conventions for the disputed cases
///         (RU and CY are EU; TR, GE, AM, AZ are AS; EG is AF; TL is OC).
const char* ContinentOfCountry(std::string_view iso2);

}  // namespace geogate::routing

#include "routing/country_continent.h"

#include <array>
#include <cstdint>

namespace geogate::routing {
namespace {

constexpr std::array<const char*, 8> kContinents = {nullptr, "AF", "AN", "AS",
                                                    "EU",    "NA", "OC", "SA"};

// Every ISO 3166-1 alpha-2 code (249) plus XK, grouped by continent and kept
// sorted so a missing or duplicated code is easy to spot in review. The unit
// test checks the count and that no code appears twice.
struct Group {
  uint8_t continent;  // index into kContinents
  const char* codes;  // space-separated
};
constexpr Group kGroups[] = {
    {4,  // EU
     "AD AL AT AX BA BE BG BY CH CY CZ DE DK EE ES FI FO FR GB GG GI GR HR HU IE IM IS IT JE LI "
     "LT LU LV MC MD ME MK MT NL NO PL PT RO RS RU SE SI SJ SK SM UA VA XK"},
    {3,  // AS
     "AE AF AM AZ BD BH BN BT CC CN CX GE HK ID IL IN IO IQ IR JO JP KG KH KP KR KW KZ LA LB LK "
     "MM MN MO MV MY NP OM PH PK PS QA SA SG SY TH TJ TM TR TW UZ VN YE"},
    {1,  // AF
     "AO BF BI BJ BW CD CF CG CI CM CV DJ DZ EG EH ER ET GA GH GM GN GQ GW KE KM LR LS LY MA MG "
     "ML MR MU MW MZ NA NE NG RE RW SC SD SH SL SN SO SS ST SZ TD TG TN TZ UG YT ZA ZM ZW"},
    {5,  // NA: North and Central America, the Caribbean, Greenland
     "AG AI AW BB BL BM BQ BS BZ CA CR CU CW DM DO GD GL GP GT HN HT JM KN KY LC MF MQ MS MX NI "
     "PA PM PR SV SX TC TT US VC VG VI"},
    {7,  // SA
     "AR BO BR CL CO EC FK GF GY PE PY SR UY VE"},
    {6,  // OC
     "AS AU CK FJ FM GU KI MH MP NC NF NR NU NZ PF PG PN PW SB TK TL TO TV UM VU WF WS"},
    {2,  // AN: Antarctica and the sub-Antarctic islands
     "AQ BV GS HM TF"},
};

// 26 x 26 table indexed by the two letters, built at compile time so a lookup
// is two subtractions and a load.
using Table = std::array<uint8_t, 26 * 26>;

constexpr Table BuildTable() {
  Table t{};
  for (const Group& g : kGroups) {
    for (const char* p = g.codes; *p != '\0';) {
      t[static_cast<size_t>((p[0] - 'A') * 26 + (p[1] - 'A'))] = g.continent;
      p += 2;
      if (*p == ' ') ++p;
    }
  }
  return t;
}

constexpr Table kTable = BuildTable();

int Letter(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a';
  return -1;
}

}  // namespace

const char* ContinentOfCountry(std::string_view iso2) {
  if (iso2.size() != 2) return nullptr;
  int a = Letter(iso2[0]);
  int b = Letter(iso2[1]);
  if (a < 0 || b < 0) return nullptr;
  return kContinents[kTable[static_cast<size_t>(a * 26 + b)]];
}

}  // namespace geogate::routing

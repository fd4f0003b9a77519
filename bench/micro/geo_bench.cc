// Per-request costs of the geo path: mmdb lookup, X-Forwarded-For walk,
// PROXY header parse. Lookups run against the generated City fixture, against
// MaxMind's GeoIP2-City test database when ../shared has it (realistic record
// shape: names in 8 languages to skip over), and against GEOGATE_GEO_DB when
// set.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "routing/client_ip.h"
#include "routing/mmdb_geo_resolver.h"
#include "routing/proxy_protocol.h"

namespace {

using geogate::config::Cidr;
using geogate::config::ClientIpSource;
using geogate::config::Geo;
using geogate::routing::IpAddr;
using geogate::routing::MmdbGeoResolver;

std::vector<IpAddr> Addresses(std::initializer_list<const char*> texts) {
  std::vector<IpAddr> out;
  for (const char* t : texts)
    out.push_back(*IpAddr::Parse(t));
  return out;
}

// `cold`: two resolvers over the same file, used in turn. Their record
// cache entries collide slot for slot, so every lookup decodes the record:
// the cost of a client from a city this thread has not seen recently.
void BM_Lookup(benchmark::State& state, std::string path, std::string country_field,
               std::vector<IpAddr> ips, bool cold) {
  Geo fields;
  fields.country_field = country_field;
  auto a = MmdbGeoResolver::Open(path, fields);
  auto b = MmdbGeoResolver::Open(path, fields);
  if (!a.ok() || !b.ok()) {
    state.SkipWithError(std::string((a.ok() ? b : a).status().message()).c_str());
    return;
  }
  const MmdbGeoResolver* geo[2] = {a->get(), cold ? b->get() : a->get()};
  size_t i = 0;
  size_t pass = 0;
  size_t found = 0;
  for (auto _ : state) {
    // Switching resolver after each pass over `ips` makes every lookup of
    // the next pass find its slot taken by the other resolver.
    auto g = geo[pass & 1]->Lookup(ips[i]);
    found += g.found;
    benchmark::DoNotOptimize(g);
    if (++i == ips.size()) {
      i = 0;
      ++pass;
    }
  }
  state.counters["found_share"] =
      static_cast<double>(found) / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
}

Cidr Prefix(const char* addr, int len) {
  IpAddr ip = *IpAddr::Parse(addr);
  Cidr c;
  c.addr = ip.bytes;
  c.prefix_len = static_cast<uint8_t>(ip.is_v4() ? len + 96 : len);
  return c;
}

void BM_ResolveXff(benchmark::State& state, std::string xff) {
  Geo geo;
  geo.client_ip = ClientIpSource::kXForwardedFor;
  geo.trusted_proxies = {Prefix("127.0.0.0", 8), Prefix("10.0.0.0", 8), Prefix("fd00::", 8)};
  IpAddr peer = *IpAddr::Parse("10.0.0.1");
  for (auto _ : state) {
    IpAddr c = geogate::routing::ResolveClientIp(geo, peer, xff, std::nullopt);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK_CAPTURE(BM_ResolveXff, one_hop, std::string("203.0.113.7"));
BENCHMARK_CAPTURE(BM_ResolveXff, two_hops, std::string("203.0.113.7, 10.0.0.2"));
BENCHMARK_CAPTURE(BM_ResolveXff, spoofed_chain_v6,
                  std::string("1.2.3.4, unknown, 198.51.100.1, [2001:db8:49::5]:443, "
                              "10.0.0.9, fd00::3"));

void BM_ParseProxy(benchmark::State& state, std::vector<uint8_t> header) {
  for (auto _ : state) {
    auto r = geogate::routing::ParseProxyProtocol(header);
    benchmark::DoNotOptimize(r);
  }
}
std::vector<uint8_t> V2Tcp4() {
  std::vector<uint8_t> h = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49,
                            0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C, 198,  51,   100,  7,
                            10,   0,    0,    1,    0xDB, 0x04, 0x01, 0xBB};
  h.insert(h.end(), {'G', 'E', 'T', ' ', '/'});
  return h;
}
std::vector<uint8_t> V1Tcp4() {
  std::string s = "PROXY TCP4 198.51.100.7 10.0.0.1 56068 443\r\nGET /";
  return std::vector<uint8_t>(s.begin(), s.end());
}
BENCHMARK_CAPTURE(BM_ParseProxy, v2_tcp4, V2Tcp4());
BENCHMARK_CAPTURE(BM_ParseProxy, v1_tcp4, V1Tcp4());

void BM_IpAddrParse(benchmark::State& state, std::string text) {
  for (auto _ : state) {
    auto ip = IpAddr::Parse(text);
    benchmark::DoNotOptimize(ip);
  }
}
BENCHMARK_CAPTURE(BM_IpAddrParse, v4, std::string("203.0.113.7"));
BENCHMARK_CAPTURE(BM_IpAddrParse, v6, std::string("2001:db8:49::5"));

// Each lookup benchmark twice: warm (the per-thread record cache hits, the
// common case) and cold (every lookup decodes its record).
void RegisterLookup(const std::string& name, const std::string& path, const std::string& field,
                    const std::vector<IpAddr>& ips) {
  benchmark::RegisterBenchmark(("BM_Lookup/" + name).c_str(), BM_Lookup, path, field, ips, false);
  benchmark::RegisterBenchmark(("BM_Lookup/" + name + "/cold").c_str(), BM_Lookup, path, field, ips,
                               true);
}

void RegisterLookups() {
  const std::string city = GEOGATE_GEO_CITY_MMDB;
  RegisterLookup("fixture_city/v4", city, "country.iso_code",
                 Addresses({"192.0.2.1", "198.51.100.17", "203.0.113.1", "203.0.113.49",
                            "192.0.2.193", "198.51.100.49", "203.0.113.65", "192.0.2.33"}));
  RegisterLookup("fixture_city/v6", city, "country.iso_code",
                 Addresses({"2001:db8:49::1", "2001:db8:1::1", "2001:db8:81::1", "2001:db8:61::1",
                            "2001:db8:55::1", "2001:db8:27::1"}));
  RegisterLookup("fixture_city/not_found", city, "country.iso_code",
                 Addresses({"203.0.113.200", "10.1.2.3", "2001:db8:dead::1"}));

  std::string maxmind = std::string(GEOGATE_GEOIP_TESTDATA) + "/GeoIP2-City-Test.mmdb";
  if (std::filesystem::exists(maxmind)) {
    RegisterLookup("maxmind_city_test/v4", maxmind, "country.iso_code",
                   Addresses({"81.2.69.142", "216.160.83.56", "89.160.20.112", "175.16.199.1",
                              "67.43.156.1"}));
    RegisterLookup("maxmind_city_test/v6", maxmind, "country.iso_code",
                   Addresses({"2001:218::1", "2001:220::1", "2a02:cf40::1", "2001:252::1"}));
  }
  if (const char* db = std::getenv("GEOGATE_GEO_DB"); db != nullptr && *db != '\0') {
    const char* field = std::getenv("GEOGATE_GEO_COUNTRY_FIELD");
    std::string f = field != nullptr && *field != '\0' ? field : "country.iso_code";
    RegisterLookup("GEOGATE_GEO_DB/v4", db, f,
                   Addresses({"8.8.8.8", "1.1.1.1", "194.25.2.129", "81.2.69.142", "203.0.113.1",
                              "41.0.0.1", "200.160.2.3"}));
    RegisterLookup("GEOGATE_GEO_DB/v6", db, f,
                   Addresses({"2001:4860:4860::8888", "2606:4700:4700::1111", "2a00:1450:4001::1",
                              "2400:cb00::1"}));
  }
}

}  // namespace

int main(int argc, char** argv) {
  RegisterLookups();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

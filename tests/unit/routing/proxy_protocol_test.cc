#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "routing/proxy_protocol.h"
#include "routing_test_util.h"

using geogate::routing::IpAddr;
using geogate::routing::kMaxProxyHeaderBytes;
using geogate::routing::ParseProxyProtocol;
using geogate::routing::ProxyParseResult;
using geogate::routing::ProxyParseStatus;
using geogate::routing::testing::Ip;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes B(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

ProxyParseResult Parse(const Bytes& b, size_t n) {
  return ParseProxyProtocol(std::span<const uint8_t>(b.data(), n));
}
ProxyParseResult Parse(const Bytes& b) {
  return Parse(b, b.size());
}

// Every strict prefix of a complete header must ask for more bytes.
void CheckEveryTruncationNeedsMore(const Bytes& header) {
  for (size_t n = 0; n < header.size(); ++n) {
    INFO("first " << n << " of " << header.size() << " bytes");
    CHECK(Parse(header, n).status == ProxyParseStatus::kNeedMore);
  }
}

// The first `n` bytes are already enough to know the header is bad, and the
// verdict holds for any longer input.
void CheckInvalidFrom(const Bytes& bad, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    INFO("first " << i << " bytes");
    CHECK(Parse(bad, i).status == ProxyParseStatus::kNeedMore);
  }
  for (size_t i = n; i <= bad.size(); ++i) {
    INFO("first " << i << " bytes");
    CHECK(Parse(bad, i).status == ProxyParseStatus::kInvalid);
  }
}

const Bytes kV2Sig = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

Bytes V2(uint8_t ver_cmd, uint8_t fam, const Bytes& body) {
  Bytes b = kV2Sig;
  b.push_back(ver_cmd);
  b.push_back(fam);
  b.push_back(static_cast<uint8_t>(body.size() >> 8));
  b.push_back(static_cast<uint8_t>(body.size()));
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

Bytes Inet4Body(const Bytes& tlvs = {}) {
  Bytes b = {198, 51, 100, 7, 10, 0, 0, 1, 0xDB, 0x04, 0x01, 0xBB};  // :56068 -> :443
  b.insert(b.end(), tlvs.begin(), tlvs.end());
  return b;
}

Bytes Inet6Body() {
  Bytes b = {0x20, 0x01, 0x0D, 0xB8, 0x00, 0x49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05,  // src
             0xFD, 0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,  // dst
             0x00, 0x50, 0x20, 0xFB};                                              // 80 -> 8443
  return b;
}

}  // namespace

TEST_CASE("PROXY v1 TCP4", "[proxy_protocol]") {
  std::string line = "PROXY TCP4 192.0.2.1 10.0.0.1 56324 443\r\n";
  Bytes b = B(line + "GET / HTTP/1.1\r\n");
  auto r = Parse(b);
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == line.size());
  CHECK_FALSE(r.header.local);
  REQUIRE(r.header.source);
  CHECK(r.header.source->ToString() == "192.0.2.1");
  CHECK(r.header.source->is_v4());
  CHECK(r.header.destination->ToString() == "10.0.0.1");
  CHECK(r.header.source_port == 56324);
  CHECK(r.header.destination_port == 443);
  CheckEveryTruncationNeedsMore(B(line));
}

TEST_CASE("PROXY v1 TCP6", "[proxy_protocol]") {
  std::string line = "PROXY TCP6 2001:db8:49::5 fd00::1 0 65535\r\n";
  auto r = Parse(B(line));
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == line.size());
  CHECK(r.header.source == Ip("2001:db8:49::5"));
  CHECK(r.header.destination == Ip("fd00::1"));
  CHECK(r.header.source_port == 0);
  CHECK(r.header.destination_port == 65535);
  CheckEveryTruncationNeedsMore(B(line));

  // An IPv4-mapped source is valid IPv6 text; it comes out as IPv4.
  auto mapped = Parse(B("PROXY TCP6 ::ffff:192.0.2.1 ::1 1 2\r\n"));
  REQUIRE(mapped.status == ProxyParseStatus::kDone);
  CHECK(mapped.header.source->is_v4());
  CHECK(mapped.header.source->ToString() == "192.0.2.1");
}

TEST_CASE("PROXY v1 longest header is accepted", "[proxy_protocol]") {
  // The spec's worst case: 104 bytes.
  std::string v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  std::string line = "PROXY TCP6 " + v6 + " " + v6 + " 65535 65535\r\n";
  REQUIRE(line.size() <= 107);
  auto r = Parse(B(line));
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == line.size());
  CheckEveryTruncationNeedsMore(B(line));
}

TEST_CASE("PROXY v1 UNKNOWN means use the peer address", "[proxy_protocol]") {
  for (std::string line :
       {std::string("PROXY UNKNOWN\r\n"),
        std::string("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n")}) {
    INFO(line);
    auto r = Parse(B(line + "payload"));
    REQUIRE(r.status == ProxyParseStatus::kDone);
    CHECK(r.header.local);
    CHECK_FALSE(r.header.source);
    CHECK(r.header.consumed == line.size());
    CheckEveryTruncationNeedsMore(B(line));
  }
}

TEST_CASE("PROXY v1 garbage is invalid as soon as it is knowable", "[proxy_protocol]") {
  // Not a PROXY header at all: the first byte decides.
  CheckInvalidFrom(B("GET / HTTP/1.1\r\n"), 1);
  CheckInvalidFrom(B("\x16\x03\x01\x02\x00"), 1);
  CheckInvalidFrom(B("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), 1);
  CheckInvalidFrom(B("PROXX TCP4"), 5);
  CheckInvalidFrom(B("PROXY\tTCP4"), 6);
  CheckInvalidFrom(B("PROXY  TCP4 1.2.3.4"), 7);  // double space
  CheckInvalidFrom(B("PROXY TCP5 1.2.3.4"), 10);  // TCP5 can never be valid
  CheckInvalidFrom(B("PROXY UDP4 1.2.3.4"), 8);   // "U" could be UNKNOWN
  CheckInvalidFrom(B("PROXY TCP4\r\n"), 11);
  CheckInvalidFrom(B("PROXY TCP4 1.2.3.4x 5.6.7.8 1 2\r\n"), 19);
  CheckInvalidFrom(B("PROXY TCP4 1.2.3.4 5.6.7.8 0123 80\r\n"), 29);  // leading zero
  CheckInvalidFrom(B("PROXY UNKNOWNX\r\n"), 14);
  CheckInvalidFrom(B("PROXY UNKNOWN x\ny\r\n"), 16);  // bare LF
}

TEST_CASE("PROXY v1 malformed complete lines are invalid", "[proxy_protocol]") {
  for (const char* line : {
           "PROXY TCP4 1.2.3.4 5.6.7.8 80 443\n",        // LF without CR
           "PROXY TCP4 1.2.3.4 5.6.7.8 80 443\r\r\n",    // CR CR LF
           "PROXY TCP4 1.2.3.4 5.6.7.8 80 443 \r\n",     // trailing space
           "PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n",          // missing port
           "PROXY TCP4 1.2.3.4 5.6.7.8 80  443\r\n",     // double space
           "PROXY TCP4 1.2.3.4 5.6.7.8 65536 443\r\n",   // port out of range
           "PROXY TCP4 1.2.3.4 5.6.7.8 99999 443\r\n",   // port out of range
           "PROXY TCP4 1.2.3.4 5.6.7.8 -1 443\r\n",      // sign
           "PROXY TCP4 1.2.3.4 5.6.7.8 080 443\r\n",     // leading zero
           "PROXY TCP4 1.2.3.4 5.6.7.8 123456 443\r\n",  // too many digits
           "PROXY TCP4 256.2.3.4 5.6.7.8 80 443\r\n",    // bad address
           "PROXY TCP4 1.2.3 5.6.7.8 80 443\r\n",        // bad address
           "PROXY TCP4 ::1 ::1 80 443\r\n",              // family mismatch
           "PROXY TCP6 1.2.3.4 5.6.7.8 80 443\r\n",      // family mismatch
           "PROXY TCP6 2001:db8::1 5.6.7.8 80 443\r\n",  // family mismatch
           "PROXY TCP6 2001:db8:::1 ::1 80 443\r\n",     // bad address
           "PROXY TCP4 1.2.3.4  5.6.7.8 80 443\r\n",
           "PROXY TCP4 1.2.3.4\r\n",
           "PROXY tcp4 1.2.3.4 5.6.7.8 80 443\r\n",
           "PROXY \r\n",
       }) {
    INFO(line);
    CHECK(Parse(B(line)).status == ProxyParseStatus::kInvalid);
  }
}

TEST_CASE("PROXY v1 lines are at most 107 bytes", "[proxy_protocol]") {
  std::string head = "PROXY UNKNOWN ";
  std::string fill(107 - head.size() - 2, 'x');
  auto ok = Parse(B(head + fill + "\r\n"));
  REQUIRE(ok.status == ProxyParseStatus::kDone);
  CHECK(ok.header.consumed == 107);
  CHECK(Parse(B(head + fill + "x\r\n")).status == ProxyParseStatus::kInvalid);
  // No CRLF: waits up to the limit, then gives up.
  Bytes endless = B(head + std::string(500, 'x'));
  CHECK(Parse(endless, 106).status == ProxyParseStatus::kNeedMore);
  CHECK(Parse(endless, 107).status == ProxyParseStatus::kInvalid);
  CHECK(Parse(endless).status == ProxyParseStatus::kInvalid);
  // An address run longer than any address is rejected before the limit.
  CHECK(Parse(B("PROXY TCP4 1111111111111111")).status == ProxyParseStatus::kInvalid);
}

TEST_CASE("PROXY v2 PROXY TCP over IPv4", "[proxy_protocol]") {
  Bytes h = V2(0x21, 0x11, Inet4Body());
  Bytes with_payload = h;
  with_payload.push_back('G');
  auto r = Parse(with_payload);
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == 16 + 12);
  CHECK_FALSE(r.header.local);
  CHECK(r.header.source == Ip("198.51.100.7"));
  CHECK(r.header.destination == Ip("10.0.0.1"));
  CHECK(r.header.source_port == 56068);
  CHECK(r.header.destination_port == 443);
  CheckEveryTruncationNeedsMore(h);
}

TEST_CASE("PROXY v2 PROXY TCP over IPv6", "[proxy_protocol]") {
  Bytes h = V2(0x21, 0x21, Inet6Body());
  auto r = Parse(h);
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == 16 + 36);
  CHECK(r.header.source == Ip("2001:db8:49::5"));
  CHECK(r.header.destination == Ip("fd00::1"));
  CHECK(r.header.source_port == 80);
  CHECK(r.header.destination_port == 8443);
  CheckEveryTruncationNeedsMore(h);

  Bytes mapped_body = Inet6Body();
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
  std::copy(std::begin(mapped), std::end(mapped), mapped_body.begin());
  auto m = Parse(V2(0x21, 0x21, mapped_body));
  REQUIRE(m.status == ProxyParseStatus::kDone);
  CHECK(m.header.source->is_v4());
  CHECK(m.header.source->ToString() == "192.0.2.1");
}

TEST_CASE("PROXY v2 TLVs are skipped", "[proxy_protocol]") {
  Bytes tlvs = {0x01, 0x00, 0x02, 'h', '2',  // ALPN
                0x02, 0x00, 0x0B, 'e', 'x', 'a', 'm',
                'p',  'l',  'e',  '.', 'c', 'o', 'm',  // authority
                0x04, 0x00, 0x03, 0,   0,   0};        // NOOP padding
  Bytes h = V2(0x21, 0x11, Inet4Body(tlvs));
  Bytes with_payload = h;
  with_payload.insert(with_payload.end(), {'G', 'E', 'T'});
  auto r = Parse(with_payload);
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == h.size());
  CHECK(r.header.source == Ip("198.51.100.7"));
  CheckEveryTruncationNeedsMore(h);
}

TEST_CASE("PROXY v2 LOCAL, UNSPEC and UNIX mean use the peer address", "[proxy_protocol]") {
  SECTION("LOCAL without addresses") {
    Bytes h = V2(0x20, 0x00, {});
    auto r = Parse(h);
    REQUIRE(r.status == ProxyParseStatus::kDone);
    CHECK(r.header.local);
    CHECK_FALSE(r.header.source);
    CHECK(r.header.consumed == 16);
    CheckEveryTruncationNeedsMore(h);
  }
  SECTION("LOCAL with an address block, which is ignored") {
    Bytes h = V2(0x20, 0x11, Inet4Body());
    auto r = Parse(h);
    REQUIRE(r.status == ProxyParseStatus::kDone);
    CHECK(r.header.local);
    CHECK_FALSE(r.header.source);
    CHECK(r.header.consumed == h.size());
  }
  SECTION("PROXY with UNSPEC family") {
    auto r = Parse(V2(0x21, 0x00, {}));
    REQUIRE(r.status == ProxyParseStatus::kDone);
    CHECK(r.header.local);
  }
  SECTION("PROXY over a UNIX socket") {
    Bytes h = V2(0x21, 0x31, Bytes(216, 0));
    auto r = Parse(h);
    REQUIRE(r.status == ProxyParseStatus::kDone);
    CHECK(r.header.local);
    CHECK(r.header.consumed == 16 + 216);
    CHECK(Parse(V2(0x21, 0x31, Bytes(215, 0))).status == ProxyParseStatus::kInvalid);
  }
}

TEST_CASE("PROXY v2 garbage is invalid as soon as it is knowable", "[proxy_protocol]") {
  Bytes bad_sig = kV2Sig;
  bad_sig[5] = 0x0E;
  CheckInvalidFrom(bad_sig, 6);
  CheckInvalidFrom(V2(0x11, 0x11, Inet4Body()), 13);   // version 1 in a v2 header
  CheckInvalidFrom(V2(0x31, 0x11, Inet4Body()), 13);   // version 3
  CheckInvalidFrom(V2(0x22, 0x11, Inet4Body()), 13);   // command 2
  CheckInvalidFrom(V2(0x21, 0x41, Inet4Body()), 14);   // family 4
  CheckInvalidFrom(V2(0x21, 0x13, Inet4Body()), 14);   // transport 3
  CheckInvalidFrom(V2(0x21, 0x10, Inet4Body()), 14);   // INET with UNSPEC transport
  CheckInvalidFrom(V2(0x21, 0x01, Inet4Body()), 14);   // UNSPEC with STREAM
  CheckInvalidFrom(V2(0x21, 0x12, Inet4Body()), 14);   // UDP on a TCP listener
  CheckInvalidFrom(V2(0x21, 0x11, Bytes(11, 0)), 16);  // too short for IPv4
  CheckInvalidFrom(V2(0x21, 0x21, Bytes(35, 0)), 16);  // too short for IPv6
  CheckInvalidFrom(V2(0x21, 0x21, Inet4Body()), 16);
}

TEST_CASE("PROXY v2 largest header", "[proxy_protocol]") {
  Bytes body = Inet4Body();
  // One NOOP TLV filling the rest of the 16-bit length.
  size_t tlv_len = 65535 - body.size() - 3;
  body.push_back(0x04);
  body.push_back(static_cast<uint8_t>(tlv_len >> 8));
  body.push_back(static_cast<uint8_t>(tlv_len));
  body.resize(65535, 0);
  Bytes h = V2(0x21, 0x11, body);
  REQUIRE(h.size() == kMaxProxyHeaderBytes);
  CHECK(Parse(h, h.size() - 1).status == ProxyParseStatus::kNeedMore);
  auto r = Parse(h);
  REQUIRE(r.status == ProxyParseStatus::kDone);
  CHECK(r.header.consumed == kMaxProxyHeaderBytes);
}

TEST_CASE("PROXY parser: empty input needs more", "[proxy_protocol]") {
  CHECK(ParseProxyProtocol({}).status == ProxyParseStatus::kNeedMore);
}

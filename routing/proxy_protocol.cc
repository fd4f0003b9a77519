#include "routing/proxy_protocol.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <string_view>

namespace geogate::routing {
namespace {

// --- v1 (text): "PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n" ---
constexpr std::string_view kV1Prefix = "PROXY ";
constexpr size_t kV1MaxLine = 107;  // spec: worst case including CRLF

// --- v2 (binary): 12-byte signature, ver/cmd, family, length, addresses ---
constexpr std::array<uint8_t, 12> kV2Signature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                  0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr size_t kV2HeaderBytes = 16;
constexpr uint8_t kV2CmdLocal = 0x0;
constexpr uint8_t kV2CmdProxy = 0x1;
constexpr uint8_t kV2FamUnspec = 0x0;
constexpr uint8_t kV2FamInet = 0x1;
constexpr uint8_t kV2FamInet6 = 0x2;
constexpr uint8_t kV2FamUnix = 0x3;
constexpr uint8_t kV2TransUnspec = 0x0;
constexpr uint8_t kV2TransStream = 0x1;
constexpr uint8_t kV2TransDgram = 0x2;
constexpr size_t kV2InetBytes = 4 + 4 + 2 + 2;
constexpr size_t kV2Inet6Bytes = 16 + 16 + 2 + 2;
constexpr size_t kV2UnixBytes = 108 + 108;

ProxyParseResult Invalid() {
  return {ProxyParseStatus::kInvalid, {}};
}
ProxyParseResult NeedMore() {
  return {ProxyParseStatus::kNeedMore, {}};
}

// Cursor over the v1 line received so far. Every step either consumes a
// complete, valid token, or reports that the input ended inside a token that
// could still become valid (kNeedMore), or that it cannot (kInvalid). So
// garbage is rejected as soon as the offending byte arrives.
class V1Parser {
 public:
  explicit V1Parser(std::span<const uint8_t> data)
      : in_(reinterpret_cast<const char*>(data.data()), std::min(data.size(), kV1MaxLine)),
        truncated_(data.size() >= kV1MaxLine) {}

  ProxyParseResult Parse() {
    pos_ = kV1Prefix.size();
    std::string_view proto;
    if (auto r =
            Token(proto, 7, [](char c) { return (c >= 'A' && c <= 'Z') || c == '4' || c == '6'; });
        r != ProxyParseStatus::kDone) {
      // A partial protocol must still be able to become one we know.
      if (r == ProxyParseStatus::kNeedMore && IsPrefixOfProto(proto)) return Incomplete();
      return Invalid();
    }
    if (proto == "UNKNOWN") return ParseUnknown();
    bool v4 = proto == "TCP4";
    if (!v4 && proto != "TCP6") return Invalid();
    if (auto r = Expect(' '); r != ProxyParseStatus::kDone) return Result(r);

    ProxyHeader h;
    auto is_addr_char =
        v4 ? +[](char c) { return (c >= '0' && c <= '9') || c == '.'; } : +[](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                 c == ':' || c == '.';
        };
    size_t max_addr = v4 ? 15 : 45;
    for (std::optional<IpAddr>* dst : {&h.source, &h.destination}) {
      std::string_view text;
      if (auto r = Token(text, max_addr, is_addr_char); r != ProxyParseStatus::kDone)
        return Result(r);
      auto ip = IpAddr::Parse(text);
      // The address must match the announced family: TCP4 needs dotted
      // quad, TCP6 needs IPv6 text (a v4-mapped one is fine, it is IPv6).
      bool has_colon = text.find(':') != std::string_view::npos;
      if (!ip || has_colon == v4) return Invalid();
      *dst = *ip;
      if (auto r = Expect(' '); r != ProxyParseStatus::kDone) return Result(r);
    }
    for (uint16_t* port : {&h.source_port, &h.destination_port}) {
      std::string_view text;
      if (auto r = Token(text, 5, [](char c) { return c >= '0' && c <= '9'; });
          r != ProxyParseStatus::kDone) {
        // "0" is complete; "05" can never become valid.
        if (r == ProxyParseStatus::kNeedMore && text.size() > 1 && text[0] == '0') return Invalid();
        return Result(r);
      }
      if (text.size() > 1 && text[0] == '0') return Invalid();
      uint32_t v = 0;
      for (char c : text)
        v = v * 10 + static_cast<uint32_t>(c - '0');
      if (v > 65535) return Invalid();
      *port = static_cast<uint16_t>(v);
      if (port == &h.source_port) {
        if (auto r = Expect(' '); r != ProxyParseStatus::kDone) return Result(r);
      }
    }
    if (auto r = Expect('\r'); r != ProxyParseStatus::kDone) return Result(r);
    if (auto r = Expect('\n'); r != ProxyParseStatus::kDone) return Result(r);
    h.consumed = pos_;
    return {ProxyParseStatus::kDone, h};
  }

 private:
  static bool IsPrefixOfProto(std::string_view s) {
    for (std::string_view p : {"TCP4", "TCP6", "UNKNOWN"})
      if (p.substr(0, s.size()) == s) return true;
    return false;
  }

  // "PROXY UNKNOWN" then, optionally, a space and anything up to CRLF, which
  // the spec says receivers must ignore.
  ProxyParseResult ParseUnknown() {
    if (pos_ == in_.size()) return Incomplete();
    if (in_[pos_] == ' ') {
      for (size_t i = pos_ + 1; i < in_.size(); ++i) {
        if (in_[i] == '\n') return Invalid();  // a bare LF is not a line end
        if (in_[i] == '\r') {
          pos_ = i;
          break;
        }
      }
      if (in_[pos_] != '\r') return Incomplete();
    }
    if (auto r = Expect('\r'); r != ProxyParseStatus::kDone) return Result(r);
    if (auto r = Expect('\n'); r != ProxyParseStatus::kDone) return Result(r);
    ProxyHeader h;
    h.local = true;
    h.consumed = pos_;
    return {ProxyParseStatus::kDone, h};
  }

  // Reads a run of `ok` characters of at most `max` into `out`. kDone when a
  // non-`ok` byte follows a non-empty run (not consumed); kNeedMore when the
  // input ends inside the run; kInvalid when the run is empty or too long.
  template <class Pred>
  ProxyParseStatus Token(std::string_view& out, size_t max, Pred ok) {
    size_t start = pos_;
    while (pos_ < in_.size() && ok(in_[pos_])) {
      if (pos_ - start == max) return ProxyParseStatus::kInvalid;
      ++pos_;
    }
    out = in_.substr(start, pos_ - start);
    if (pos_ == in_.size()) return ProxyParseStatus::kNeedMore;
    return out.empty() ? ProxyParseStatus::kInvalid : ProxyParseStatus::kDone;
  }

  ProxyParseStatus Expect(char c) {
    if (pos_ == in_.size()) return ProxyParseStatus::kNeedMore;
    if (in_[pos_] != c) return ProxyParseStatus::kInvalid;
    ++pos_;
    return ProxyParseStatus::kDone;
  }

  // Out of input: wait for more, unless the line is already at the length
  // limit, in which case it can never complete.
  ProxyParseResult Incomplete() const { return truncated_ ? Invalid() : NeedMore(); }
  ProxyParseResult Result(ProxyParseStatus s) const {
    return s == ProxyParseStatus::kNeedMore ? Incomplete() : Invalid();
  }

  std::string_view in_;
  bool truncated_;
  size_t pos_ = 0;
};

uint16_t Be16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

ProxyParseResult ParseV2(std::span<const uint8_t> data) {
  // Each header byte is checked as soon as it arrives.
  if (data.size() <= 12) return NeedMore();
  uint8_t version = data[12] >> 4;
  uint8_t command = data[12] & 0x0F;
  if (version != 2 || (command != kV2CmdLocal && command != kV2CmdProxy)) return Invalid();

  if (data.size() <= 13) return NeedMore();
  uint8_t family = data[13] >> 4;
  uint8_t transport = data[13] & 0x0F;
  if (family > kV2FamUnix || transport > kV2TransDgram) return Invalid();
  // The spec defines UNSPEC only together with UNSPEC.
  if ((family == kV2FamUnspec) != (transport == kV2TransUnspec)) return Invalid();
  bool use_addresses = command == kV2CmdProxy && (family == kV2FamInet || family == kV2FamInet6);
  // We are a TCP gateway: a PROXY header announcing a UDP flow is a
  // misconfigured sender, not something to paper over.
  if (use_addresses && transport != kV2TransStream) return Invalid();

  if (data.size() < kV2HeaderBytes) return NeedMore();
  size_t len = Be16(&data[14]);
  if (command == kV2CmdProxy) {
    size_t need = family == kV2FamInet    ? kV2InetBytes
                  : family == kV2FamInet6 ? kV2Inet6Bytes
                  : family == kV2FamUnix  ? kV2UnixBytes
                                          : 0;
    if (len < need) return Invalid();
  }
  size_t total = kV2HeaderBytes + len;
  if (data.size() < total) return NeedMore();

  ProxyHeader h;
  h.consumed = total;
  if (!use_addresses) {
    // LOCAL (health checks from the balancer itself), UNSPEC and UNIX: the
    // connection's own endpoints are the ones to use.
    h.local = true;
    return {ProxyParseStatus::kDone, h};
  }
  const uint8_t* a = &data[kV2HeaderBytes];
  if (family == kV2FamInet) {
    auto v4 = [](const uint8_t* p) {
      return IpAddr::FromV4((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                            (uint32_t{p[2]} << 8) | uint32_t{p[3]});
    };
    h.source = v4(a);
    h.destination = v4(a + 4);
    h.source_port = Be16(a + 8);
    h.destination_port = Be16(a + 10);
  } else {
    std::array<uint8_t, 16> b;
    std::memcpy(b.data(), a, 16);
    h.source = IpAddr::FromV6(b);
    std::memcpy(b.data(), a + 16, 16);
    h.destination = IpAddr::FromV6(b);
    h.source_port = Be16(a + 32);
    h.destination_port = Be16(a + 34);
  }
  // Anything after the address block is TLVs (ALPN, authority, CRC32C,
  // unique id, SSL info): skipped, the length already covers them.
  return {ProxyParseStatus::kDone, h};
}

// True when the first min(size, prefix.size()) bytes of data equal prefix.
template <class Prefix>
bool MatchesPrefix(std::span<const uint8_t> data, const Prefix& prefix) {
  size_t n = std::min(data.size(), std::size(prefix));
  for (size_t i = 0; i < n; ++i)
    if (data[i] != static_cast<uint8_t>(prefix[i])) return false;
  return true;
}

}  // namespace

ProxyParseResult ParseProxyProtocol(std::span<const uint8_t> data) {
  if (data.empty()) return NeedMore();
  if (data[0] == static_cast<uint8_t>(kV1Prefix[0])) {
    if (!MatchesPrefix(data, kV1Prefix)) return Invalid();
    if (data.size() < kV1Prefix.size()) return NeedMore();
    return V1Parser(data).Parse();
  }
  if (data[0] == kV2Signature[0]) {
    if (!MatchesPrefix(data, kV2Signature)) return Invalid();
    if (data.size() < kV2Signature.size()) return NeedMore();
    return ParseV2(data);
  }
  return Invalid();
}

}  // namespace geogate::routing

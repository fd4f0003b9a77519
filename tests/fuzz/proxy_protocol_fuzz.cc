// Fuzzes ParseProxyProtocol with arbitrary bytes and checks the invariants
// the connection code relies on:
//  - kDone: 0 < consumed <= size; parsing exactly the header gives the same
//    header; every shorter prefix of it is kNeedMore; more bytes after it do
//    not change it; `local` is set exactly when there is no source address.
//  - kNeedMore: below the size limit, and every prefix is kNeedMore too.
//  - kInvalid: final, more bytes never make it valid.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "routing/proxy_protocol.h"
#include "tests/fuzz/fuzz_check.h"

using geogate::routing::kMaxProxyHeaderBytes;
using geogate::routing::ParseProxyProtocol;
using geogate::routing::ProxyHeader;
using geogate::routing::ProxyParseStatus;

using geogate::fuzz::Check;

namespace {

bool Same(const ProxyHeader& a, const ProxyHeader& b) {
  return a.consumed == b.consumed && a.local == b.local && a.source == b.source &&
         a.source_port == b.source_port && a.destination == b.destination &&
         a.destination_port == b.destination_port;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  auto r = ParseProxyProtocol(in);
  std::vector<uint8_t> longer(data, data + size);
  longer.insert(longer.end(), {'\r', '\n', 'G', 'E', 'T'});

  switch (r.status) {
    case ProxyParseStatus::kDone: {
      const ProxyHeader& h = r.header;
      Check(h.consumed > 0 && h.consumed <= size && h.consumed <= kMaxProxyHeaderBytes);
      Check(h.local != h.source.has_value());
      Check(h.source.has_value() == h.destination.has_value());
      auto again = ParseProxyProtocol(in.first(h.consumed));
      Check(again.status == ProxyParseStatus::kDone && Same(again.header, h));
      Check(ParseProxyProtocol(in.first(h.consumed - 1)).status == ProxyParseStatus::kNeedMore);
      Check(ParseProxyProtocol(in.first(h.consumed / 2)).status == ProxyParseStatus::kNeedMore);
      auto extended = ParseProxyProtocol(longer);
      Check(extended.status == ProxyParseStatus::kDone && Same(extended.header, h));
      break;
    }
    case ProxyParseStatus::kNeedMore:
      Check(size < kMaxProxyHeaderBytes);
      if (size > 0) {
        Check(ParseProxyProtocol(in.first(size - 1)).status == ProxyParseStatus::kNeedMore);
        Check(ParseProxyProtocol(in.first(size / 2)).status == ProxyParseStatus::kNeedMore);
      }
      break;
    case ProxyParseStatus::kInvalid:
      Check(ParseProxyProtocol(longer).status == ProxyParseStatus::kInvalid);
      break;
  }
  return 0;
}

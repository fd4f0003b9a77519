#include "proxy/header_line.h"

#include <cstring>

namespace geogate::proxy {

namespace {
// Lines up to this size are put together on the stack first: nearly every
// field the gateway writes (a long one is an API key or a client's
// tracestate).
constexpr size_t kStagedLine = 192;
}  // namespace

void AppendHeaderLine(common::PooledString& out, std::string_view name, std::string_view value) {
  const size_t size = name.size() + value.size() + 4;
  if (size > kStagedLine) {
    out.append(name).append(": ").append(value).append("\r\n");
    return;
  }
  char line[kStagedLine];
  std::memcpy(line, name.data(), name.size());
  char* p = line + name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
  out.append(line, size);
}

}  // namespace geogate::proxy

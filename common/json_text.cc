#include "common/json_text.h"

#include <cstdint>
#include <cstring>

namespace geogate::common {

namespace {

constexpr uint64_t kBytes01 = 0x0101010101010101ull;
constexpr uint64_t kBytes80 = 0x8080808080808080ull;

// Whether any of the eight bytes of `w` needs an escape: a control
// character (< 0x20), a quote or a backslash. Exact (the usual "has a zero
// byte" test; bytes >= 0x80 never match).
constexpr bool NeedsEscape(uint64_t w) {
  uint64_t control = (w - 0x20 * kBytes01) & ~w & kBytes80;
  uint64_t q = w ^ ('"' * kBytes01);
  uint64_t quote = (q - kBytes01) & ~q & kBytes80;
  uint64_t b = w ^ ('\\' * kBytes01);
  uint64_t backslash = (b - kBytes01) & ~b & kBytes80;
  return (control | quote | backslash) != 0;
}

char* EscapeByte(char* dst, unsigned char u) {
  if (u >= 0x20 && u != '"' && u != '\\') {
    *dst++ = static_cast<char>(u);
    return dst;
  }
  *dst++ = '\\';
  switch (u) {
    case '"':
    case '\\':
      *dst++ = static_cast<char>(u);
      break;
    case '\n':
      *dst++ = 'n';
      break;
    case '\r':
      *dst++ = 'r';
      break;
    case '\t':
      *dst++ = 't';
      break;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char esc[5] = {'u', '0', '0', kHex[u >> 4], kHex[u & 0xf]};
      std::memcpy(dst, esc, sizeof esc);
      dst += sizeof esc;
    }
  }
  return dst;
}

}  // namespace

// Eight bytes at a time while none needs an escape (nearly all of a log
// line): the byte-by-byte scan was the access log's largest cost.
char* WriteJsonString(char* dst, std::string_view s) {
  *dst++ = '"';
  const char* p = s.data();
  const char* end = p + s.size();
  while (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    if (!NeedsEscape(w)) {
      std::memcpy(dst, p, sizeof w);
      dst += sizeof w;
      p += sizeof w;
      continue;
    }
    for (int i = 0; i < 8; ++i)
      dst = EscapeByte(dst, static_cast<unsigned char>(*p++));
  }
  while (p < end)
    dst = EscapeByte(dst, static_cast<unsigned char>(*p++));
  *dst++ = '"';
  return dst;
}

}  // namespace geogate::common

#include "common/json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

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
      const absl::AlphaNum digits(absl::Hex(u, absl::kZeroPad4));
      *dst++ = 'u';
      std::memcpy(dst, digits.data(), 4);
      dst += 4;
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

// The exact decimal rounding std::to_chars does (which printf does), but
// through one integer when that cannot differ from it: v * 10^digits is
// within half an ulp of the exact product, so unless it lies that close to
// a half its nearest integer is the exact one's. Otherwise, and for
// negative, huge or non-finite values, to_chars itself (about 500
// instructions a number: four of them were 5 % of a plain request's).
char* WriteFixed(char* dst, double v, int digits) {
  constexpr int64_t kPowersOf10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  if (digits >= 0 && digits <= 8 && !std::signbit(v) && v < 1e9) {
    const int64_t scale = kPowersOf10[digits];
    double scaled = v * static_cast<double>(scale);
    double whole = std::floor(scaled);
    double frac = scaled - whole;
    // 4 to 8 ulps of `scaled`; from 2^49 on that is half a unit or more,
    // nothing passes, and such values go to to_chars.
    double margin = std::max(scaled, 1.0) * 0x1p-50;
    if (std::fabs(frac - 0.5) > margin) {
      int64_t n = static_cast<int64_t>(whole) + (frac > 0.5 ? 1 : 0);
      dst = std::to_chars(dst, dst + 20, n / scale).ptr;
      if (digits > 0) {
        *dst++ = '.';
        int64_t f = n % scale;
        for (int i = digits - 1; i >= 0; --i) {
          dst[i] = static_cast<char>('0' + f % 10);
          f /= 10;
        }
        dst += digits;
      }
      return dst;
    }
  }
  // to_chars fails rather than overrun kFixedBytes.
  auto r = std::to_chars(dst, dst + kFixedBytes, v, std::chars_format::fixed, digits);
  if (r.ec != std::errc()) {  // beyond 1e50: not a duration or a price
    *dst++ = '0';
    return dst;
  }
  return r.ptr;
}

}  // namespace geogate::common

#include "config/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "absl/strings/str_cat.h"

namespace geogate::config {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

std::optional<uint32_t> ParseDecimal(std::string_view digits, uint32_t max) {
  if (digits.empty() || digits.size() > 5) return std::nullopt;
  uint32_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

std::string NtoP(int family, const void* bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes, buf, sizeof buf);
  return buf;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(std::string_view text, bool allow_port_zero) {
  std::string host;
  std::string_view port_text;
  int family;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return Invalid(absl::StrCat("'", std::string(text), "' has no closing ']'"));
    }
    host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return Invalid(absl::StrCat("'", std::string(text), "' needs a port, e.g. [::]:8080"));
    }
    port_text = rest.substr(1);
    family = AF_INET6;
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Invalid(absl::StrCat("'", std::string(text), "' needs a port, e.g. 0.0.0.0:8080"));
    }
    if (text.find(':') != colon) {
      return Invalid(absl::StrCat("IPv6 address '", std::string(text),
                                  "' must be in brackets, e.g. [::]:8080"));
    }
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    family = AF_INET;
  }
  unsigned char buf[16];
  if (host.empty() || inet_pton(family, host.c_str(), buf) != 1) {
    return Invalid(absl::StrCat("'", host, "' is not a numeric ",
                                family == AF_INET6 ? "IPv6" : "IPv4",
                                " address (host names are not accepted here)"));
  }
  auto port = ParseDecimal(port_text, 65535);
  if (!port) {
    return Invalid(absl::StrCat("port '", std::string(port_text), "' is not a number from ",
                                allow_port_zero ? 0 : 1, " to 65535"));
  }
  if (*port == 0 && !allow_port_zero) return Invalid("port 0 is not allowed here");
  return HostPort{NtoP(family, buf), static_cast<uint16_t>(*port)};
}

absl::StatusOr<Cidr> ParseCidr(std::string_view text) {
  std::string_view addr_text = text;
  std::optional<std::string_view> prefix_text;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    addr_text = text.substr(0, slash);
    prefix_text = text.substr(slash + 1);
  }
  bool v6 = addr_text.find(':') != std::string_view::npos;
  std::string addr(addr_text);
  Cidr cidr;
  unsigned max_prefix = v6 ? 128 : 32;
  if (v6) {
    if (inet_pton(AF_INET6, addr.c_str(), cidr.addr.data()) != 1) {
      return Invalid(absl::StrCat("'", addr, "' is not an IPv6 address"));
    }
  } else {
    cidr.addr[10] = 0xff;
    cidr.addr[11] = 0xff;
    if (inet_pton(AF_INET, addr.c_str(), cidr.addr.data() + 12) != 1) {
      return Invalid(absl::StrCat("'", addr, "' is not an IPv4 address"));
    }
  }
  uint32_t prefix = max_prefix;
  if (prefix_text) {
    auto p = ParseDecimal(*prefix_text, max_prefix);
    if (!p) {
      return Invalid(absl::StrCat("prefix length '", std::string(*prefix_text),
                                  "' must be a number from 0 to ", max_prefix));
    }
    prefix = *p;
  }
  cidr.prefix_len = static_cast<uint8_t>(v6 ? prefix : prefix + 96);

  // Host bits set usually means a typo in the prefix length or the address;
  // refusing is safer than guessing which network the operator trusts.
  Cidr network = cidr;
  for (size_t bit = cidr.prefix_len; bit < 128; ++bit) {
    network.addr[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  if (network.addr != cidr.addr) {
    std::string net =
        v6 ? NtoP(AF_INET6, network.addr.data()) : NtoP(AF_INET, network.addr.data() + 12);
    return Invalid(absl::StrCat("'", std::string(text), "' has host bits set (did you mean '", net,
                                "/", prefix, "'?)"));
  }
  return cidr;
}

namespace {

// "." or "..", also with the dots written "%2E" (what a backend would decode
// them to). Boost.URL's segments() view hides a leading "/." (its marker for
// a path that would otherwise start with "//"), so the path is split here.
bool HasDotSegment(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view segment = path.substr(start, end - start);
    size_t dots = 0;
    while (!segment.empty()) {
      if (segment.front() == '.') {
        segment.remove_prefix(1);
      } else if (segment.size() >= 3 && segment[0] == '%' && segment[1] == '2' &&
                 (segment[2] == 'e' || segment[2] == 'E')) {
        segment.remove_prefix(3);
      } else {
        break;
      }
      ++dots;
    }
    if (segment.empty() && (dots == 1 || dots == 2)) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

absl::StatusOr<BackendUrl> ParseBackendUrl(std::string_view text) {
  if (text.find("://") == std::string_view::npos) {
    return Invalid(absl::StrCat("'", std::string(text),
                                "' is not a URL: it needs a scheme, http:// or https://"));
  }
  // parse_uri rather than parse_absolute_uri: the latter refuses fragments
  // outright, and a clear "no fragment" beats a grammar error.
  auto parsed = boost::urls::parse_uri(boost::urls::string_view(text.data(), text.size()));
  if (!parsed) {
    return Invalid(absl::StrCat("'", std::string(text), "' is not a valid URL (",
                                parsed.error().message(), ")"));
  }
  const boost::urls::url_view& u = *parsed;
  BackendUrl out;
  switch (u.scheme_id()) {
    case boost::urls::scheme::http:
      out.tls = false;
      break;
    case boost::urls::scheme::https:
      out.tls = true;
      break;
    default:
      return Invalid(absl::StrCat("URL scheme '", std::string(u.scheme()),
                                  "' is not supported (use http or https)"));
  }
  if (!u.has_authority() || u.encoded_host().empty()) {
    return Invalid(absl::StrCat("URL '", std::string(text), "' has no host"));
  }
  if (u.has_userinfo()) {
    // Credentials in a URL end up in logs; backends get keys via api_key_env.
    return Invalid("URL must not contain user information (use api_key_env for credentials)");
  }
  if (u.has_query()) return Invalid("URL must not contain a query ('?...')");
  if (u.has_fragment()) return Invalid("URL must not contain a fragment ('#...')");
  if (u.host_type() == boost::urls::host_type::ipvfuture) {
    return Invalid("IPvFuture host literals are not supported");
  }
  out.host = u.host_address();
  if (u.host_type() == boost::urls::host_type::name) {
    std::transform(out.host.begin(), out.host.end(), out.host.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  if (u.has_port()) {
    std::string_view port_text(u.port().data(), u.port().size());
    auto port = ParseDecimal(port_text, 65535);
    if (!port || *port == 0) {
      return Invalid(
          absl::StrCat("URL port '", std::string(port_text), "' must be a number from 1 to 65535"));
    }
    out.port = static_cast<uint16_t>(*port);
  } else {
    out.port = out.tls ? 443 : 80;
  }
  std::string path(u.encoded_path().data(), u.encoded_path().size());
  if (HasDotSegment(path)) {
    return Invalid(absl::StrCat("URL '", std::string(text),
                                "' must not contain a dot segment ('.' or '..') in its path"));
  }
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  // Like an OpenAI SDK's base_url ("https://api.openai.com/v1") the URL may
  // end in the API's /v1; the client's path brings its own.
  constexpr std::string_view kApiVersion = "/v1";
  std::string_view root = path;
  if (root.ends_with(kApiVersion)) root.remove_suffix(kApiVersion.size());
  out.root = std::string(root);
  out.base_path = std::move(path);
  return out;
}

}  // namespace geogate::config

// Helpers for the showback, budget and capacity tests: a small fleet loaded
// through the real config loader, wall-clock instants written as RFC 3339,
// and a scratch directory.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "common/strings.h"
#include "config/loader.h"

namespace geogate::accounting::testing {

/// Two regions; H100 reserved + on-demand and an L4 spot backend serving two
/// models in eu-west; one smaller H100 reserved backend in us-east.
inline constexpr std::string_view kFleet = R"(
[gateway]
edge = "fra1"
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "eu-west"
jurisdiction = "EU"
location = { lat = 53.35, lon = -6.26 }
[[regions]]
name = "us-east"
jurisdiction = "US"
location = { lat = 38.9, lon = -77.0 }
[[backends]]
name = "eu-h100-r1"
region = "eu-west"
url = "http://10.0.1.1:8000"
models = ["llama-70b"]
gpu = "H100"
provider = "provider-a"
tier = "reserved"
capacity = 64
cost_per_hour = 2.49
[[backends]]
name = "eu-h100-od1"
region = "eu-west"
url = "http://10.0.1.2:8000"
models = ["llama-70b"]
gpu = "H100"
provider = "provider-b"
tier = "on-demand"
capacity = 64
cost_per_hour = 4.0
[[backends]]
name = "eu-l4-s1"
region = "eu-west"
url = "http://10.0.1.3:8000"
models = ["llama-8b", "mistral-7b"]
gpu = "L4"
provider = "provider-c"
tier = "spot"
capacity = 16
cost_per_hour = 0.5
[[backends]]
name = "us-h100-r1"
region = "us-east"
url = "http://10.0.2.1:8000"
models = ["llama-70b"]
gpu = "H100"
provider = "provider-a"
tier = "reserved"
capacity = 32
cost_per_hour = 2.0
[[tenants]]
name = "acme"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000001"]
monthly_budget = 100
[[tenants]]
name = "beta"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000002"]
)";

inline config::SnapshotConstPtr LoadSnapshot(std::string_view text) {
  auto env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  config::LoadResult r = config::LoadString(text, "fleet.toml", "/", env);
  std::ostringstream errors;
  for (const auto& e : r.errors)
    errors << e.ToString() << "\n";
  INFO(errors.str());
  REQUIRE(r.ok());
  return r.snapshot;
}

inline config::SnapshotConstPtr Fleet() {
  return LoadSnapshot(kFleet);
}

/// Unix ms of an RFC 3339 instant ("2025-03-01T10:05:00Z"). Free of Catch
/// macros so tests may call it at namespace scope; a typo aborts.
inline int64_t Ms(std::string_view rfc3339) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, ToAbsl(rfc3339), &t, &err)) std::abort();
  return absl::ToUnixMillis(t);
}

/// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "geogate-showback-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteAll(const std::string& path, std::string_view text, bool append = false) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out << text;
}

}  // namespace geogate::accounting::testing

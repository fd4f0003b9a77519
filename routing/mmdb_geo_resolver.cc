#include "routing/mmdb_geo_resolver.h"

#include <maxminddb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "routing/country_continent.h"

namespace geogate::routing {
namespace {

// Bounds of the schema check at Open: enough to see past a few records that
// legitimately lack a country, small enough to cost milliseconds on a
// whole-internet database.
constexpr size_t kCheckMaxNodes = size_t{1} << 20;
constexpr size_t kCheckMaxRecords = 4096;
constexpr size_t kCheckMinRecords = 16;

std::string Quote(std::string_view s) {
  return absl::StrCat("\"", absl::string_view(s.data(), s.size()), "\"");
}

const char* TypeName(uint32_t type) {
  switch (type) {
    case MMDB_DATA_TYPE_UTF8_STRING:
      return "string";
    case MMDB_DATA_TYPE_DOUBLE:
      return "double";
    case MMDB_DATA_TYPE_BYTES:
      return "bytes";
    case MMDB_DATA_TYPE_UINT16:
      return "uint16";
    case MMDB_DATA_TYPE_UINT32:
      return "uint32";
    case MMDB_DATA_TYPE_MAP:
      return "map";
    case MMDB_DATA_TYPE_INT32:
      return "int32";
    case MMDB_DATA_TYPE_UINT64:
      return "uint64";
    case MMDB_DATA_TYPE_UINT128:
      return "uint128";
    case MMDB_DATA_TYPE_ARRAY:
      return "array";
    case MMDB_DATA_TYPE_BOOLEAN:
      return "boolean";
    case MMDB_DATA_TYPE_FLOAT:
      return "float";
    default:
      return "unknown type";
  }
}

bool IsCorruption(int rc) {
  return rc == MMDB_INVALID_DATA_ERROR || rc == MMDB_CORRUPT_SEARCH_TREE_ERROR ||
         rc == MMDB_INVALID_NODE_NUMBER_ERROR;
}

// MMDB_aget_value wants a mutable entry; lookups work on a copy.
int GetValue(const MMDB_entry_s& entry, const char* const* path, MMDB_entry_data_s* out) {
  MMDB_entry_s start = entry;
  return MMDB_aget_value(&start, out, path);
}

bool ReadString(const MMDB_entry_s& entry, const char* const* path, std::string_view* out) {
  MMDB_entry_data_s d;
  if (GetValue(entry, path, &d) != MMDB_SUCCESS || !d.has_data ||
      d.type != MMDB_DATA_TYPE_UTF8_STRING)
    return false;
  *out = std::string_view(d.utf8_string, d.data_size);
  return true;
}

bool ReadNumber(const MMDB_entry_s& entry, const char* const* path, double* out) {
  MMDB_entry_data_s d;
  if (GetValue(entry, path, &d) != MMDB_SUCCESS || !d.has_data) return false;
  switch (d.type) {
    case MMDB_DATA_TYPE_DOUBLE:
      *out = d.double_value;
      return true;
    case MMDB_DATA_TYPE_FLOAT:
      *out = d.float_value;
      return true;
    case MMDB_DATA_TYPE_INT32:
      *out = d.int32;
      return true;
    case MMDB_DATA_TYPE_UINT16:
      *out = d.uint16;
      return true;
    case MMDB_DATA_TYPE_UINT32:
      *out = d.uint32;
      return true;
    default:
      return false;
  }
}

bool IsAlpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
char Upper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

// Copies a two-letter code upper-cased; false for anything else.
bool CopyCode2(std::string_view s, char (&out)[3]) {
  if (s.size() != 2 || !IsAlpha(s[0]) || !IsAlpha(s[1])) return false;
  out[0] = Upper(s[0]);
  out[1] = Upper(s[1]);
  out[2] = '\0';
  return true;
}

// ISO 3166-2 subdivision code part ("HE" of "DE-HE"); accepts either form.
bool CopySubdivision(std::string_view s, char (&out)[8]) {
  if (size_t dash = s.find('-'); dash != std::string_view::npos) s.remove_prefix(dash + 1);
  if (s.empty() || s.size() >= sizeof out) return false;
  for (char c : s)
    if (!IsAlpha(c) && !(c >= '0' && c <= '9')) return false;
  for (size_t i = 0; i < s.size(); ++i)
    out[i] = Upper(s[i]);
  out[s.size()] = '\0';
  return true;
}

// Node after the value starting at `n` in a flattened entry data list.
const MMDB_entry_data_list_s* SkipValue(const MMDB_entry_data_list_s* n) {
  if (n == nullptr) return nullptr;
  uint32_t type = n->entry_data.type;
  uint32_t size = n->entry_data.data_size;
  n = n->next;
  if (type == MMDB_DATA_TYPE_MAP) {
    for (uint32_t i = 0; i < size && n != nullptr; ++i)
      n = SkipValue(n->next);  // key, value
  } else if (type == MMDB_DATA_TYPE_ARRAY) {
    for (uint32_t i = 0; i < size && n != nullptr; ++i)
      n = SkipValue(n);
  }
  return n;
}

// Decodes a whole record; returns the MMDB status and, for a map, its keys.
int DecodeRecord(const MMDB_entry_s& entry, std::vector<std::string>* keys) {
  MMDB_entry_s start = entry;
  MMDB_entry_data_list_s* list = nullptr;
  int rc = MMDB_get_entry_data_list(&start, &list);
  if (rc == MMDB_SUCCESS && keys != nullptr && list != nullptr &&
      list->entry_data.type == MMDB_DATA_TYPE_MAP) {
    const MMDB_entry_data_list_s* n = list->next;
    for (uint32_t i = 0; i < list->entry_data.data_size && n != nullptr; ++i) {
      if (n->entry_data.type == MMDB_DATA_TYPE_UTF8_STRING)
        keys->emplace_back(n->entry_data.utf8_string, n->entry_data.data_size);
      n = SkipValue(n->next);
    }
  }
  MMDB_free_entry_data_list(list);
  return rc;
}

// Per-thread cache of decoded records, direct-mapped by data offset. 1024
// slots of 56 bytes: 56 KiB per thread, constant-initialised (no TLS guard).
struct RecordCacheSlot {
  uint64_t resolver_id = 0;  // 0: empty
  uint32_t offset = 0;
  GeoInfo info;
};
constexpr size_t kRecordCacheSlots = 1024;
thread_local std::array<RecordCacheSlot, kRecordCacheSlots> tls_record_cache;

size_t CacheIndex(uint32_t offset) {
  // Fibonacci hashing: record offsets are clustered, the top bits are not.
  return static_cast<size_t>((offset * 2654435769u) >> 22) & (kRecordCacheSlots - 1);
}

std::atomic<uint64_t> next_resolver_id{1};

}  // namespace

void MmdbCloser::operator()(MMDB_s* db) const {
  MMDB_close(db);
  delete db;
}

bool MmdbGeoResolver::FieldPath::Set(std::string_view dotted) {
  text_ = std::string(dotted);
  parts_.clear();
  argv_.clear();
  if (dotted.empty()) return true;  // not configured
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string_view part =
        dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start);
    if (part.empty()) return false;
    parts_.emplace_back(part);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  for (const std::string& p : parts_)
    argv_.push_back(p.c_str());
  argv_.push_back(nullptr);
  return true;
}

MmdbGeoResolver::MmdbGeoResolver(std::unique_ptr<MMDB_s, MmdbCloser> db, std::string path)
    : db_(std::move(db)), id_(next_resolver_id.fetch_add(1, std::memory_order_relaxed)) {
  const MMDB_metadata_s& m = db_->metadata;
  info_.path = std::move(path);
  info_.database_type = m.database_type != nullptr ? m.database_type : "";
  info_.build_epoch = m.build_epoch;
  info_.ip_version = m.ip_version;
  info_.node_count = m.node_count;
}

MmdbGeoResolver::~MmdbGeoResolver() = default;

absl::StatusOr<std::shared_ptr<const MmdbGeoResolver>> MmdbGeoResolver::Open(
    const std::string& path, const config::Geo& fields) {
  const std::string where = absl::StrCat("geo database ", Quote(path));
  auto raw = std::make_unique<MMDB_s>();
  int rc = MMDB_open(path.c_str(), MMDB_MODE_MMAP, raw.get());
  if (rc != MMDB_SUCCESS) {
    // MMDB_open frees what it allocated on failure; `raw` is not to be closed.
    if (rc == MMDB_FILE_OPEN_ERROR || rc == MMDB_IO_ERROR) {
      // libmaxminddb does not report errno reliably after its cleanup; ask
      // the file system ourselves for the operator-facing reason.
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) {
        int err = errno;
        std::string why = std::error_code(err, std::generic_category()).message();
        if (err == ENOENT) return absl::NotFoundError(absl::StrCat(where, ": ", why));
        return absl::PermissionDeniedError(absl::StrCat(where, ": cannot open: ", why));
      }
      if (S_ISDIR(st.st_mode))
        return absl::InvalidArgumentError(absl::StrCat(where, ": is a directory"));
      return absl::UnavailableError(absl::StrCat(where, ": cannot read: ", MMDB_strerror(rc)));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a valid MaxMind DB file: ", MMDB_strerror(rc)));
  }
  std::shared_ptr<MmdbGeoResolver> r(
      new MmdbGeoResolver(std::unique_ptr<MMDB_s, MmdbCloser>(raw.release()), path));
  if (absl::Status s = r->SetFields(fields); !s.ok()) return s;
  if (absl::Status s = r->CheckRecords(); !s.ok()) return s;
  return std::shared_ptr<const MmdbGeoResolver>(std::move(r));
}

absl::Status MmdbGeoResolver::SetFields(const config::Geo& fields) {
  struct {
    FieldPath* path;
    const std::string& text;
    const char* key;
  } const all[] = {
      {&country_, fields.country_field, "country_field"},
      {&continent_, fields.continent_field, "continent_field"},
      {&subdivision_, fields.subdivision_field, "subdivision_field"},
      {&latitude_, fields.latitude_field, "latitude_field"},
      {&longitude_, fields.longitude_field, "longitude_field"},
  };
  for (const auto& f : all) {
    if (!f.path->Set(f.text))
      return absl::InvalidArgumentError(
          absl::StrCat("geo.", f.key, " ", Quote(f.text), " is not a dotted field path"));
  }
  if (country_.empty()) return absl::InvalidArgumentError("geo.country_field must not be empty");
  // "location.latitude" and "location.longitude": find "location" once per
  // record instead of twice (each walk from the top of a GeoIP2 record skips
  // city, continent and country with their names in many languages).
  if (latitude_.size() >= 2 && latitude_.size() == longitude_.size()) {
    std::string prefix;
    bool shared = true;
    for (size_t i = 0; i + 1 < latitude_.size() && shared; ++i) {
      shared = latitude_.part(i) == longitude_.part(i);
      absl::StrAppend(&prefix, i == 0 ? "" : ".", latitude_.part(i));
    }
    if (shared) location_.Set(prefix);
  }
  return absl::OkStatus();
}

absl::Status MmdbGeoResolver::CheckRecords() const {
  const std::string where =
      absl::StrCat("geo database ", Quote(info_.path), " (", Quote(info_.database_type), ")");
  auto corrupt = [&](std::string_view what) {
    return absl::DataLossError(
        absl::StrCat(where, ": corrupt: ", absl::string_view(what.data(), what.size())));
  };
  const MMDB_s* db = db_.get();
  const uint32_t max_depth = info_.ip_version == 4 ? 32 : 128;
  struct Item {
    uint32_t node;
    uint32_t depth;
  };
  std::vector<Item> stack = {{0, 0}};
  size_t nodes = 0;
  size_t records = 0;
  size_t with_country = 0;
  std::vector<std::string> first_keys;
  std::string country_mismatch;
  const FieldPath* all[] = {&country_, &continent_, &subdivision_, &latitude_, &longitude_};

  // Depth-first from the root, lower addresses first, so the records seen
  // are the first ones of the address space, as a reader would meet them.
  while (!stack.empty() && nodes < kCheckMaxNodes && records < kCheckMaxRecords &&
         !(with_country > 0 && records >= kCheckMinRecords)) {
    Item it = stack.back();
    stack.pop_back();
    ++nodes;
    MMDB_search_node_s n;
    if (int rc = MMDB_read_node(db, it.node, &n); rc != MMDB_SUCCESS)
      return corrupt(MMDB_strerror(rc));
    const struct {
      uint64_t record;
      uint8_t type;
      MMDB_entry_s entry;
    } sides[] = {{n.right_record, n.right_record_type, n.right_record_entry},
                 {n.left_record, n.left_record_type, n.left_record_entry}};
    for (const auto& side : sides) {
      switch (side.type) {
        case MMDB_RECORD_TYPE_EMPTY:
          break;
        case MMDB_RECORD_TYPE_SEARCH_NODE:
          if (it.depth + 1 >= max_depth) return corrupt("search tree deeper than the address size");
          stack.push_back({static_cast<uint32_t>(side.record), it.depth + 1});
          break;
        case MMDB_RECORD_TYPE_DATA: {
          ++records;
          if (int rc = DecodeRecord(side.entry, first_keys.empty() ? &first_keys : nullptr);
              rc != MMDB_SUCCESS)
            return corrupt(MMDB_strerror(rc));
          for (const FieldPath* f : all) {
            if (f->empty()) continue;
            MMDB_entry_data_s d;
            int rc = GetValue(side.entry, f->argv(), &d);
            if (IsCorruption(rc)) return corrupt(MMDB_strerror(rc));
            if (f != &country_ || rc != MMDB_SUCCESS || !d.has_data) continue;
            if (d.type == MMDB_DATA_TYPE_UTF8_STRING)
              ++with_country;
            else if (country_mismatch.empty())
              country_mismatch = TypeName(d.type);
          }
          break;
        }
        default:
          return corrupt("invalid search tree record");
      }
    }
  }
  if (records == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": contains no records"));
  if (with_country == 0) {
    std::string msg = absl::StrCat(where, ": no record has a string at geo.country_field ",
                                   Quote(country_.text()));
    if (!country_mismatch.empty())
      absl::StrAppend(&msg, " (it is a ", country_mismatch, ", not a string)");
    if (!first_keys.empty())
      absl::StrAppend(&msg, "; records have the keys [", absl::StrJoin(first_keys, ", "), "]");
    absl::StrAppend(
        &msg,
        "; set geo.country_field to the path of the ISO country code "
        "(\"country.iso_code\" for GeoIP2/GeoLite2, \"country_code\" for flat schemas)");
    return absl::InvalidArgumentError(msg);
  }
  return absl::OkStatus();
}

GeoInfo MmdbGeoResolver::Lookup(const IpAddr& ip) const {
  GeoInfo out;
  sockaddr_in sin;
  sockaddr_in6 sin6;
  const sockaddr* sa;
  if (ip.is_v4()) {
    // As AF_INET, so libmaxminddb starts at its IPv4 subtree: works for
    // IPv4-only databases and for IPv6 ones with or without the aliases.
    std::memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    std::memcpy(&sin.sin_addr, ip.bytes.data() + 12, 4);
    sa = reinterpret_cast<const sockaddr*>(&sin);
  } else {
    if (info_.ip_version == 4) return out;  // an IPv4-only database cannot place it
    std::memset(&sin6, 0, sizeof sin6);
    sin6.sin6_family = AF_INET6;
    std::memcpy(&sin6.sin6_addr, ip.bytes.data(), 16);
    sa = reinterpret_cast<const sockaddr*>(&sin6);
  }
  int err = MMDB_SUCCESS;
  MMDB_lookup_result_s r = MMDB_lookup_sockaddr(db_.get(), sa, &err);
  if (err != MMDB_SUCCESS || !r.found_entry) return out;

  // Records are shared by many networks (one per city or country), so the
  // decoded answer is cached per thread by record offset: a hit costs the
  // tree walk only. The resolver id keeps answers of a reloaded database (or
  // of other field settings) apart; no locks, nothing shared.
  RecordCacheSlot& slot = tls_record_cache[CacheIndex(r.entry.offset)];
  if (slot.resolver_id == id_ && slot.offset == r.entry.offset) return slot.info;
  out = Decode(r.entry);
  slot.resolver_id = id_;
  slot.offset = r.entry.offset;
  slot.info = out;
  return out;
}

GeoInfo MmdbGeoResolver::Decode(const MMDB_entry_s& entry) const {
  GeoInfo out;
  std::string_view s;
  if (ReadString(entry, country_.argv(), &s) && CopyCode2(s, out.country)) out.found = true;
  bool have_continent = !continent_.empty() && ReadString(entry, continent_.argv(), &s) &&
                        CopyCode2(s, out.continent);
  if (!have_continent && out.found) {
    if (const char* c = ContinentOfCountry(out.country)) std::memcpy(out.continent, c, 3);
  }
  if (!subdivision_.empty() && ReadString(entry, subdivision_.argv(), &s))
    CopySubdivision(s, out.subdivision);
  if (latitude_.empty() || longitude_.empty()) return out;
  MMDB_entry_s loc = entry;
  size_t skip = 0;
  if (!location_.empty()) {
    MMDB_entry_data_s d;
    if (GetValue(entry, location_.argv(), &d) != MMDB_SUCCESS || !d.has_data ||
        d.type != MMDB_DATA_TYPE_MAP)
      return out;
    loc = MMDB_entry_s{entry.mmdb, d.offset};
    skip = location_.size();
  }
  double lat = 0;
  double lon = 0;
  if (ReadNumber(loc, latitude_.argv(skip), &lat) && ReadNumber(loc, longitude_.argv(skip), &lon) &&
      std::isfinite(lat) && std::isfinite(lon) && std::fabs(lat) <= 90 && std::fabs(lon) <= 180) {
    out.has_location = true;
    out.latitude = lat;
    out.longitude = lon;
  }
  return out;
}

GeoDbInfo MmdbGeoResolver::Info() const {
  return info_;
}

}  // namespace geogate::routing

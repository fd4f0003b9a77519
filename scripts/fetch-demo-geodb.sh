#!/usr/bin/env bash
# Fetches a real whole-internet IP-to-country database for demos and manual
# tests: ip-location-db's geo-whois-asn-country (data: CC BY 4.0, Number
# Resource Organization (NRO), via ip-location-db), from the npm registry.
#
#   scripts/fetch-demo-geodb.sh OUT_DIR
#
# Writes OUT_DIR/demo-country.mmdb, the package's combined IPv4+IPv6 file
# (the package also has -ipv4/-ipv6 files; the combined one serves both
# families, so that is the one used), plus its licence and a SOURCE note.
# The schema is flat: configure
#
#   [geo]
#   database = "OUT_DIR/demo-country.mmdb"
#   country_field = "country_code"      # continent is derived from the country
#
# When npm cannot fetch the package (offline), it falls back to the synthetic
# test fixture (tests/fixtures/geo) in the same flat schema, and says so.
# Progress goes to stderr; the one line on stdout is the database path, so
#   db=$(scripts/fetch-demo-geodb.sh .demo)
# works. GEOGATE_GEODB_VERSION=x.y.z pins the package version.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR" >&2; exit 2; }
[[ $# -eq 1 && -n "$1" ]] || usage
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
db="$out/demo-country.mmdb"
pkg="@ip-location-db/geo-whois-asn-country-mmdb"
spec="$pkg${GEOGATE_GEODB_VERSION:+@$GEOGATE_GEODB_VERSION}"
say() { echo "fetch-demo-geodb: $*" >&2; }

command -v mmdblookup >/dev/null || { say "mmdblookup is missing (Debian: mmdb-bin)"; exit 1; }

# Prints the country_code of an address, or nothing.
country_of() {
  mmdblookup --file "$1" --ip "$2" country_code 2>/dev/null | sed -n 's/.*"\([A-Z][A-Z]\)".*/\1/p'
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

source_note=""
if command -v npm >/dev/null && (cd "$work" && npm pack --loglevel=error "$spec" >pack.out 2>pack.err); then
  tgz="$work/$(tail -n 1 "$work/pack.out")"
  tar -xzf "$tgz" -C "$work"
  version="$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$work/package/package.json" | head -n 1)"
  say "fetched $pkg@$version; it contains:"
  (cd "$work/package" && ls -l -- *.mmdb) >&2
  if [[ -f "$work/package/geo-whois-asn-country.mmdb" ]]; then
    pick="geo-whois-asn-country.mmdb"
    say "using $pick (IPv4 and IPv6 in one tree)"
  elif [[ -f "$work/package/geo-whois-asn-country-ipv4.mmdb" ]]; then
    # An IPv4-only tree: IPv6 clients will be unknown (geo.unknown applies).
    pick="geo-whois-asn-country-ipv4.mmdb"
    say "no combined file in this version; using $pick: IPv6 clients will be UNKNOWN"
  else
    say "the package has no .mmdb file this script knows"; exit 1
  fi
  cp "$work/package/$pick" "$db.tmp" && mv "$db.tmp" "$db"
  cp "$work/package/NRO_LICENSE" "$out/NRO_LICENSE" 2>/dev/null || true
  source_note="$pkg@$version, file $pick. Data: CC BY 4.0, Number Resource Organization (NRO), via ip-location-db (https://github.com/sapics/ip-location-db)."
  # Real data: these must hold for any sane IP-to-country database.
  failed=0
  for check in 8.8.8.8=US 2001:4860:4860::8888=US; do
    ip="${check%=*}" want="${check#*=}"
    got="$(country_of "$db" "$ip")"
    if [[ "$pick" == *ipv4* && "$ip" == *:* ]]; then continue; fi
    if [[ "$got" == "$want" ]]; then say "check $ip -> $got ok"; else say "check $ip -> '${got}' (want $want) FAILED"; failed=1; fi
  done
  for ip in 1.1.1.1 194.25.2.129 81.2.69.142 2a00:1450:4001::1; do
    if [[ "$pick" == *ipv4* && "$ip" == *:* ]]; then continue; fi
    say "lookup $ip -> $(country_of "$db" "$ip" || true)"
  done
  eu="$(country_of "$db" 194.25.2.129)"
  case "$eu" in
    AT|BE|BG|HR|CY|CZ|DK|EE|FI|FR|DE|GR|HU|IE|IT|LV|LT|LU|MT|NL|PL|PT|RO|SK|SI|ES|SE)
      say "check EU address 194.25.2.129 -> $eu ok" ;;
    *) say "check EU address 194.25.2.129 -> '$eu' FAILED"; failed=1 ;;
  esac
  [[ $failed -eq 0 ]] || { say "the downloaded database failed its checks"; exit 1; }
elif [[ -f "$db" && -f "$out/SOURCE" ]] && ! grep -q '^SYNTHETIC' "$out/SOURCE"; then
  say "npm could not fetch $spec:"
  sed 's/^/  /' "$work/pack.err" >&2 2>/dev/null || true
  say "keeping the real database fetched earlier"
  source_note="$(cat "$out/SOURCE")"
else
  say "npm could not fetch $spec:"
  sed 's/^/  /' "$work/pack.err" >&2 2>/dev/null || true
  say "FALLBACK: generating a SYNTHETIC database from the test fixture (documentation"
  say "address ranges only, see tests/fixtures/geo/README.md); real client addresses will be UNKNOWN"
  perl "$root/tests/fixtures/geo/write-mmdb.pl" "$root/tests/fixtures/geo/geo-fixture.json" \
    "$work/city.mmdb" "$work/flat.mmdb"
  cp "$work/flat.mmdb" "$db.tmp" && mv "$db.tmp" "$db"
  source_note="SYNTHETIC: generated from tests/fixtures/geo/geo-fixture.json because npm was unreachable."
  got="$(country_of "$db" 192.0.2.1)"
  [[ "$got" == DE ]] || { say "fixture check 192.0.2.1 -> '$got' (want DE) FAILED"; exit 1; }
  say "check 192.0.2.1 -> DE ok (fixture)"
fi

printf '%s\n' "$source_note" >"$out/SOURCE"
mmdblookup --file "$db" --ip 8.8.8.8 --verbose 2>/dev/null |
  sed -n 's/^ *\(IP version\|Build epoch\|Type\|Node count\): */  \1: /p' >&2 || true
say "database:      $db"
say "configure:     [geo] database = \"$db\", country_field = \"country_code\""
say "               (continent_field can stay: the flat schema has none, so it is derived)"
say "source:        $source_note"
echo "$db"

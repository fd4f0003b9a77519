#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` CMake preset, clang) and runs each
# for a short while from a small seed corpus. Exits non-zero when a target
# crashes, leaks or trips a sanitizer or one of its invariant checks; the
# input that did it is left in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz-smoke.sh [SECONDS]     default 20 seconds per target
#
# Targets: PROXY protocol, X-Forwarded-For, the config loader, a backend's
# response, a client's request.
set -euo pipefail

seconds="${1:-20}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS]" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build-fuzz"
targets=(proxy_protocol_fuzz client_ip_fuzz config_loader_fuzz upstream_response_fuzz
         client_request_fuzz)

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2 --target "${targets[@]}"

corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# Seeds: valid headers of every kind, so the fuzzer starts from the
# interesting parts of the input space instead of rediscovering "PROXY ".
seed_proxy="$corpus/proxy_protocol"
mkdir -p "$seed_proxy"
printf 'PROXY TCP4 192.0.2.1 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n' >"$seed_proxy/v1-tcp4"
printf 'PROXY TCP6 2001:db8::1 fd00::1 0 65535\r\n' >"$seed_proxy/v1-tcp6"
printf 'PROXY UNKNOWN\r\n' >"$seed_proxy/v1-unknown"
printf 'PROXY UNKNOWN ::1 ::1 1 2\r\n' >"$seed_proxy/v1-unknown-args"
sig='\r\n\r\n\x00\r\nQUIT\n'
printf "${sig}"'\x21\x11\x00\x0c\xc6\x33\x64\x07\x0a\x00\x00\x01\xdb\x04\x01\xbb' >"$seed_proxy/v2-tcp4"
printf "${sig}"'\x21\x21\x00\x24\x20\x01\x0d\xb8\x00\x49\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50\x20\xfb' >"$seed_proxy/v2-tcp6"
printf "${sig}"'\x20\x00\x00\x00' >"$seed_proxy/v2-local"
printf "${sig}"'\x21\x11\x00\x11\xc6\x33\x64\x07\x0a\x00\x00\x01\xdb\x04\x01\xbb\x01\x00\x02h2' >"$seed_proxy/v2-tlv"

seed_xff="$corpus/client_ip"
mkdir -p "$seed_xff"
# First byte: mode/trust selector (see client_ip_fuzz.cc); the rest: the header.
printf '\x0e203.0.113.7, 10.0.0.2' >"$seed_xff/chain"
printf '\x0e198.51.100.1, 203.0.113.7:8080, [2001:db8::1]:443, 10.0.0.3' >"$seed_xff/ports"
printf '\x1e[::ffff:203.0.113.9]:80, ::ffff:10.0.0.2, fd00::5' >"$seed_xff/v6"
printf '\x0e unknown , _hidden,,\t10.0.0.5 ' >"$seed_xff/garbage"

# The config loader starts from the shipped examples, plus the shapes that
# used to reach toml++'s recursion: a long dotted key, nested arrays and
# inline tables, and strings that look like structure.
seed_config="$corpus/config_loader"
mkdir -p "$seed_config"
cp examples/*.toml "$seed_config/"
printf 'a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g = 1\n' >"$seed_config/deep-key"
printf '[[a.b]]\nx = [[[{ y.z = [ {w = 1} ] }]]]\n' >"$seed_config/nested"
printf '[[a]]\n[a.b]\nc.d.e = 1\n' >"$seed_config/array-of-tables-path"
printf 's = """a\\"""[[{"""" \nt = \x27\x27\x27.[.\x27\x27\x27 # [[\n' >"$seed_config/strings"

# A backend's responses: the first byte picks the split and the body
# buffer's size (upstream_response_fuzz.cc), the rest is the response.
seed_up="$corpus/upstream_response"
mkdir -p "$seed_up"
printf '\x05HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nx-request-id: b\r\n\r\n1c\r\ndata: {"choices":[{"delta":{}}\r\n5\r\n]}\n\n\r\n0\r\n\r\n' >"$seed_up/sse-chunked"
printf '\x2aHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{"choices":[{"text":"\\"usage\\""}],"usage":{"prompt_tokens":3}}  ' >"$seed_up/json"
printf '\x91HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta"}\n\nevent: response.completed\ndata: {"response":{"usage":{"input_tokens":1,"output_tokens":2}}}\n\n' >"$seed_up/responses-close-delimited"

# A client's requests: the first byte picks the split
# (client_request_fuzz.cc), the rest is the request.
seed_req="$corpus/client_request"
mkdir -p "$seed_req"
printf '\x10POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nAuthorization: Bearer k\r\nConnection: keep-alive\r\nX-Forwarded-For: 198.51.100.1\r\nContent-Length: 82\r\n\r\n{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"x":[1,2,3]}' >"$seed_req/post"
printf '\x33POST /v1/../v1/./completions?x=%%41 HTTP/1.1\r\nHost: gw:8080\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nConnection: x-hop\r\nx-hop: 1\r\nx-geogate-residency: eu\r\n\r\n1a\r\n{"model":"a\\u0062","stream\r\n9\r\n":false}\r\n0\r\n\r\n' >"$seed_req/chunked-two-connections"
printf '\x02GET /v1/models/meta-llama%%2FLlama-3.1-8B HTTP/1.0\r\n\r\n' >"$seed_req/get-http10"

status=0
for t in "${targets[@]}"; do
  dir="$corpus/${t%_fuzz}"
  echo "== $t: ${seconds}s from $dir"
  if ! "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$dir" \
      >"$build/$t.log" 2>&1; then
    echo "FAIL: $t crashed; last lines of $build/$t.log:" >&2
    tail -n 40 "$build/$t.log" >&2
    status=1
  else
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+.*DONE' "$build/$t.log" || true
    echo "ok: $t"
  fi
done
exit $status

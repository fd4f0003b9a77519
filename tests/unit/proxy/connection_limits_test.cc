// gateway.limits.max_connections and max_connections_per_ip as decisions:
// who makes room for a new connection, and the per-address counts.
#include "proxy/connection_limits.h"

#include <vector>

#include <catch2/catch.hpp>

#include "proxy/idle_list.h"

using namespace geogate::proxy;
using geogate::routing::IpAddr;

TEST_CASE("below the limit, or without one, a connection is admitted as it is",
          "[connection_limits]") {
  std::vector<int64_t> idle = {100, 200};
  CHECK(Admit(9, 10, idle, 0).kind == Admission::Kind::kAdmit);
  CHECK(Admit(1'000'000, 0, idle, 0).kind == Admission::Kind::kAdmit);
  std::vector<int64_t> none = {kNoIdle, kNoIdle};
  CHECK(Admit(0, 1, none, 1).kind == Admission::Kind::kAdmit);
}

TEST_CASE("at the limit the connection idle longest, on any worker, makes room",
          "[connection_limits]") {
  std::vector<int64_t> idle = {500, 100, kNoIdle, 300};
  Admission a = Admit(10, 10, idle, 0);
  CHECK(a.kind == Admission::Kind::kEvictIdle);
  CHECK(a.worker == 1);
  // Over the limit (refusals in flight count as open) it is the same.
  a = Admit(25, 10, idle, 2);
  CHECK(a.kind == Admission::Kind::kEvictIdle);
  CHECK(a.worker == 1);
}

TEST_CASE("on a tie the deciding worker closes its own", "[connection_limits]") {
  std::vector<int64_t> idle = {100, 100, 100};
  Admission a = Admit(3, 3, idle, 2);
  CHECK(a.kind == Admission::Kind::kEvictIdle);
  CHECK(a.worker == 2);
}

TEST_CASE("at the limit with nothing idle the connection is refused", "[connection_limits]") {
  std::vector<int64_t> none = {kNoIdle, kNoIdle};
  CHECK(Admit(2, 2, none, 0).kind == Admission::Kind::kRefuse);
  CHECK(Admit(5, 2, {}, 0).kind == Admission::Kind::kRefuse);
}

namespace {
struct Conn : IdleHook {
  explicit Conn(int i) : id(i) {}
  int id;
};
int OldestId(IdleList& l) {
  IdleHook* h = l.Oldest();
  return h == nullptr ? -1 : static_cast<Conn*>(h)->id;
}
}  // namespace

TEST_CASE("the idle list gives the connection idle longest, and publishes its time",
          "[connection_limits]") {
  Conn a(1), b(2), c(3);
  IdleList l;
  CHECK(l.Oldest() == nullptr);
  CHECK(l.oldest_since_ns() == kNoIdle);
  l.Push(a, 10);
  l.Push(b, 20);
  l.Push(c, 30);
  CHECK(OldestId(l) == 1);
  CHECK(l.oldest_since_ns() == 10);
  // a gets a request, then goes idle again: now it is the newest.
  l.Remove(a);
  CHECK(OldestId(l) == 2);
  CHECK(l.oldest_since_ns() == 20);
  l.Push(a, 40);
  l.Remove(b);
  CHECK(OldestId(l) == 3);
  CHECK(l.oldest_since_ns() == 30);
  l.Remove(c);
  CHECK(OldestId(l) == 1);
  CHECK(l.oldest_since_ns() == 40);
  // Pushing an idle one again keeps its time; removing a busy one is a no-op.
  l.Push(a, 50);
  CHECK(l.oldest_since_ns() == 40);
  l.Remove(b);
  l.Remove(a);
  CHECK(l.empty());
  CHECK(l.oldest_since_ns() == kNoIdle);
}

TEST_CASE("the idle list hands out each connection idle since a cutoff once, oldest first",
          "[connection_limits]") {
  Conn a(1), b(2), c(3), d(4);
  IdleList l;
  l.Push(a, 10);
  l.Push(b, 20);
  l.Push(c, 30);
  std::vector<int> handed;
  auto take = [&](int64_t cutoff) {
    handed.clear();
    l.TakeIdleSince(cutoff, [&](IdleHook& h) { handed.push_back(static_cast<Conn&>(h).id); });
  };
  take(5);
  CHECK(handed.empty());
  take(20);
  CHECK(handed == std::vector<int>{1, 2});
  CHECK(l.long_idle() == 2);
  CHECK(l.size() == 3);
  // Still idle, they are not handed out again; the next one is, when due.
  take(30);
  CHECK(handed == std::vector<int>{3});
  take(1000);
  CHECK(handed.empty());
  // Those handed out are still the oldest, and leave from either list.
  CHECK(OldestId(l) == 1);
  CHECK(l.oldest_since_ns() == 10);
  l.Push(d, 40);
  l.Remove(a);
  CHECK(OldestId(l) == 2);
  CHECK(l.oldest_since_ns() == 20);
  l.Remove(b);
  l.Remove(c);
  CHECK(l.long_idle() == 0);
  CHECK(OldestId(l) == 4);
  CHECK(l.oldest_since_ns() == 40);
  // A connection idle again after a request starts over in the recent list.
  l.Push(a, 50);
  take(45);
  CHECK(handed == std::vector<int>{4});
  CHECK(OldestId(l) == 4);
  take(50);
  CHECK(handed == std::vector<int>{1});
  // The callback may take the connection out of the list (a Close).
  l.Push(b, 60);
  l.TakeIdleSince(60, [&](IdleHook& h) { l.Remove(h); });
  CHECK(l.size() == 2);
  l.Remove(a);
  l.Remove(d);
  CHECK(l.empty());
  CHECK(l.oldest_since_ns() == kNoIdle);
}

TEST_CASE("connections are counted per address up to the limit", "[connection_limits]") {
  ConnectionsPerIp counts;
  IpAddr a = *IpAddr::Parse("192.0.2.1");
  IpAddr b = *IpAddr::Parse("2001:db8::1");
  CHECK(counts.TryAdd(a, 2));
  CHECK(counts.TryAdd(a, 2));
  CHECK_FALSE(counts.TryAdd(a, 2));
  CHECK(counts.Count(a) == 2);
  CHECK(counts.TryAdd(b, 2));  // another address is not affected
  counts.Remove(a);
  CHECK(counts.TryAdd(a, 2));  // a closed connection gives its slot back
  CHECK_FALSE(counts.TryAdd(a, 2));
  CHECK(counts.TryAdd(a, 3));  // a raised limit applies at once
  counts.Remove(a);
  counts.Remove(a);
  counts.Remove(a);
  counts.Remove(b);
  CHECK(counts.Count(a) == 0);
  CHECK(counts.addresses() == 0);  // nothing kept for addresses gone
  counts.Remove(a);                // one too many: no underflow
  CHECK(counts.Count(a) == 0);
}

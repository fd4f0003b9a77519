#include "proxy/request_handler.h"

#include <openssl/sha.h>

#include <array>
#include <optional>

#include <boost/beast/core/string.hpp>

#include "accounting/budget_tracker.h"
#include "common/json.h"
#include "proxy/cors.h"
#include "proxy/headers.h"
#include "proxy/proxy.h"
#include "proxy/request_context.h"
#include "proxy/request_target.h"
#include "proxy/response_head.h"
#include "proxy/trace_hooks.h"
#include "routing/client_ip.h"
#include "routing/residency.h"

namespace geogate::proxy {

namespace {

std::string_view StatusLabel(unsigned status) {
  static const auto kLabels = [] {
    std::array<std::string, 600> labels;
    for (unsigned i = 0; i < labels.size(); ++i)
      labels[i] = std::to_string(i);
    return labels;
  }();
  return status < kLabels.size() ? std::string_view(kLabels[status]) : "other";
}

// The request's outcome when the gateway answers it with an error.
void MarkRejected(RequestContext& ctx, ErrorKind kind) {
  ErrorSpec spec = SpecOf(kind);
  ctx.status = spec.status;
  ctx.outcome = observability::RequestOutcome::kRejected;
  ctx.error_code = spec.code;
}

net::awaitable<bool> Fail(RequestContext& ctx, ErrorKind kind, std::string_view message,
                          int retry_after_s = -1) {
  MarkRejected(ctx, kind);
  co_return co_await ctx.session.SendError(&ctx.req, kind, message, ctx.request_id, retry_after_s,
                                           &ctx.bytes_out);
}

// on_request: which tenant is this? The key is hashed at once and never
// stored or forwarded.
bool Authenticate(RequestContext& ctx) {
  if (ctx.cfg.tenants.empty()) return true;
  std::string_view auth = ctx.req[http::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() <= kBearer.size() || !beast::iequals(auth.substr(0, kBearer.size()), kBearer))
    return false;
  std::string_view key = auth.substr(kBearer.size());
  while (!key.empty() && key.front() == ' ')
    key.remove_prefix(1);
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  auto it = ctx.cfg.tenant_by_key_hash.find(digest);
  if (it == ctx.cfg.tenant_by_key_hash.end()) return false;
  ctx.tenant = it->second;
  return true;
}

// resolve_geo: the client's address, where it is, and which regions may
// serve it.
void ResolveGeo(RequestContext& ctx) {
  std::string joined;
  std::string_view xff;
  if (ctx.cfg.geo.client_ip == config::ClientIpSource::kXForwardedFor) {
    auto range = ctx.req.equal_range("x-forwarded-for");
    for (auto it = range.first; it != range.second; ++it) {
      if (xff.empty() && joined.empty()) {
        xff = it->value();
        continue;
      }
      if (joined.empty()) joined.assign(xff);
      joined += ',';
      joined += it->value();
    }
    if (!joined.empty()) xff = joined;
  }
  ctx.client_ip =
      routing::ResolveClientIp(ctx.cfg.geo, ctx.session.peer(), xff, ctx.session.proxy_source());
  // Most often the connection's own address, whose text the session keeps.
  if (ctx.client_ip == ctx.session.source())
    ctx.client_ip_text = ctx.session.source_text();
  else
    ctx.client_ip_text = ctx.client_ip.ToString();
  if (ctx.rt.geo) ctx.geo = ctx.rt.geo->Lookup(ctx.client_ip);
  std::optional<std::string_view> narrowing;
  if (auto it = ctx.req.find("x-geogate-residency"); it != ctx.req.end())
    narrowing = std::string_view(it->value());
  ctx.residency = routing::DecideResidency(ctx.cfg, ctx.geo, ctx.tenant_config(), narrowing);
  ctx.residency_decided = true;
}

// geogate_residency_decisions_total, counted once the request has ended: a
// 451 for a model served only outside the allowed set is known only after
// selection, and it is a denial like the policy's own.
void CountResidency(RequestContext& ctx) {
  if (!ctx.residency_decided) return;
  routing::ResidencyOutcome outcome = ctx.residency.outcome;
  std::string_view reason = "none";
  switch (outcome) {
    case routing::ResidencyOutcome::kAllowed:
      if (ctx.error_code == SpecOf(ErrorKind::kResidencyDenied).code) {
        outcome = routing::ResidencyOutcome::kDenied;
        reason = "model_outside_allowed";
      }
      break;
    case routing::ResidencyOutcome::kDenied:
      reason = ctx.residency.narrowed ? "narrowed_to_nothing" : "policy";
      break;
    case routing::ResidencyOutcome::kBadHeader:
      reason = "unknown_jurisdiction";
      break;
  }
  ctx.worker.metrics().residency_decisions.Add(
      {ctx.residency.RuleLabel(ctx.cfg), routing::ResidencyOutcomeName(outcome), reason});
}

// Enforces the residency outcome: the error to answer with, if any. Not a
// coroutine: the allowed case, nearly every request, costs no frame.
struct Refusal {
  ErrorKind kind;
  std::string message;
};
std::optional<Refusal> ResidencyRefusal(const RequestContext& ctx) {
  switch (ctx.residency.outcome) {
    case routing::ResidencyOutcome::kAllowed:
      return std::nullopt;
    case routing::ResidencyOutcome::kBadHeader:
      return Refusal{ErrorKind::kBadResidencyHeader, ctx.residency.Reason(ctx.cfg)};
    case routing::ResidencyOutcome::kDenied:
      break;
  }
  return Refusal{
      ErrorKind::kResidencyDenied,
      "data residency policy allows no region for this request: " + ctx.residency.Reason(ctx.cfg)};
}

boost::json::object ModelObject(std::string_view name) {
  return boost::json::object{
      {"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "geogate"}};
}

// Whether a backend in the client's allowed regions serves model `m`.
bool ServedInAllowedSet(const RequestContext& ctx, size_t m) {
  for (size_t b : ctx.cfg.backends_by_model[m])
    if (ctx.residency.allowed.contains(ctx.cfg.backends[b].region_index)) return true;
  return false;
}

// A JSON answer of the gateway's own; no body for HEAD (its Content-Length is
// still that of the GET answer).
net::awaitable<bool> SendJson(RequestContext& ctx, std::string body) {
  ResponseHead res(200, {}, ctx.req.version());
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "geogate");
  res.set("x-request-id", ctx.request_id);
  res.set("x-geogate-edge", ctx.cfg.gateway.edge);
  AddCorsResponseFields(res, ctx.rt.cors(ctx.session.listener_index()),
                        ctx.req[http::field::origin]);
  ctx.status = 200;
  bool keep_alive =
      ctx.req.keep_alive() && !ctx.worker.shared().draining.load(std::memory_order_relaxed);
  bool ok = co_await ctx.session.Send(res, body, keep_alive, ctx.req.method() == http::verb::head,
                                      ctx.bytes_out);
  if (!ok) ctx.outcome = observability::RequestOutcome::kClientClosed;
  co_return ok&& keep_alive;
}

// A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method)
// on a listener with a CORS policy, answered here and never forwarded. No
// key is asked for: browsers send none on a preflight. An unlisted origin
// gets a 403 without Access-Control-* fields, which fails the preflight in
// the browser as an answer without them would, and shows in the access log
// and the status metrics as the refusal it is.
PreflightVerdict Preflight(const RequestContext& ctx) {
  const config::Cors* policy = ctx.rt.cors(ctx.session.listener_index());
  if (policy == nullptr) return PreflightVerdict::kNotPreflight;
  return DecidePreflight(policy, ctx.req.method() == http::verb::options,
                         ctx.req[http::field::origin],
                         ctx.req[http::field::access_control_request_method]);
}

net::awaitable<bool> AnswerPreflight(RequestContext& ctx, PreflightVerdict verdict) {
  if (verdict == PreflightVerdict::kRefused) {
    co_return co_await Fail(ctx, ErrorKind::kOriginNotAllowed,
                            "this origin is not in the listener's cors_allowed_origins");
  }
  ResponseHead res(204, {}, ctx.req.version());
  res.set(http::field::server, "geogate");
  res.set("x-request-id", ctx.request_id);
  res.set("x-geogate-edge", ctx.cfg.gateway.edge);
  AddPreflightFields(res, *ctx.rt.cors(ctx.session.listener_index()), ctx.req[http::field::origin]);
  ctx.status = 204;
  bool keep_alive =
      ctx.req.keep_alive() && !ctx.worker.shared().draining.load(std::memory_order_relaxed);
  std::string_view no_body;
  bool ok = co_await ctx.session.Send(res, no_body, keep_alive, false, ctx.bytes_out);
  if (!ok) ctx.outcome = observability::RequestOutcome::kClientClosed;
  co_return ok&& keep_alive;
}

// GET /v1/models: the models a backend in the client's allowed set serves.
net::awaitable<bool> HandleModels(RequestContext& ctx) {
  if (!Authenticate(ctx))
    co_return co_await Fail(ctx, ErrorKind::kInvalidApiKey, "invalid or missing API key");
  ResolveGeo(ctx);
  if (std::optional<Refusal> refusal = ResidencyRefusal(ctx))
    co_return co_await Fail(ctx, refusal->kind, refusal->message);
  boost::json::array data;
  for (size_t m = 0; m < ctx.cfg.models.size(); ++m)
    if (ServedInAllowedSet(ctx, m)) data.push_back(ModelObject(ctx.cfg.models[m].name));
  // A named local, not a braced temporary in the co_await's arguments (GCC
  // 12 mishandles those across a suspension).
  std::string body =
      common::SerializeJson(boost::json::object{{"object", "list"}, {"data", std::move(data)}});
  co_return co_await SendJson(ctx, std::move(body));
}

// GET /v1/models/{id}: the model (by name or alias) when a backend in the
// client's allowed set serves it, else 404 model_not_found, as OpenAI
// answers for a model the key cannot use.
net::awaitable<bool> HandleModel(RequestContext& ctx, std::string id) {
  if (!Authenticate(ctx))
    co_return co_await Fail(ctx, ErrorKind::kInvalidApiKey, "invalid or missing API key");
  ResolveGeo(ctx);
  if (std::optional<Refusal> refusal = ResidencyRefusal(ctx))
    co_return co_await Fail(ctx, refusal->kind, refusal->message);
  std::optional<size_t> model = ctx.cfg.FindModel(id);
  if (!model || !ServedInAllowedSet(ctx, *model))
    co_return co_await Fail(ctx, ErrorKind::kModelNotFound,
                            "The model '" + id + "' does not exist");
  ctx.model = *model;
  std::string body = common::SerializeJson(ModelObject(ctx.cfg.models[*model].name));
  co_return co_await SendJson(ctx, std::move(body));
}

// Why an inference request is refused: Fail's arguments, the message owned.
struct Rejection {
  ErrorKind kind;
  std::string message;
  int retry_after_s = -1;
};

// Fail with a message it owns (in this frame while the answer is written).
net::awaitable<bool> Reject(RequestContext& ctx, Rejection r) {
  MarkRejected(ctx, r.kind);
  co_return co_await ctx.session.SendError(&ctx.req, r.kind, r.message, ctx.request_id,
                                           r.retry_after_s, &ctx.bytes_out);
}

// on_request of an inference: the key, the tenant's limits (its
// concurrency slot stays in ctx until the request ends), the body, the
// model and residency. Not a coroutine, nor is HandleInference: the request
// a backend serves holds no frame of theirs for its life.
// @return the refusal; nothing, with `body` parsed, when the request goes on.
std::optional<Rejection> AdmitInference(RequestContext& ctx, common::PooledPtr<RequestBody>& body) {
  if (!Authenticate(ctx)) return Rejection{ErrorKind::kInvalidApiKey, "invalid or missing API key"};

  if (const config::Tenant* t = ctx.tenant_config()) {
    TenantState& state = *ctx.rt.tenants[ctx.tenant];
    if (t->requests_per_second > 0) {
      routing::RateDecision rd = state.limiter.Acquire(health::ToNanos(ctx.start));
      if (!rd.allowed) {
        ctx.worker.metrics().tenant_rejections.Add({t->name, "rate"});
        int retry = static_cast<int>((rd.retry_after_ns + 999'999'999) / 1'000'000'000);
        return Rejection{ErrorKind::kRateLimited, "tenant request rate limit exceeded",
                         std::max(1, retry)};
      }
    }
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         ctx.worker.time().system().time_since_epoch())
                         .count();
    if (ctx.rt.budgets[ctx.tenant]->Exceeded(now_ms)) {
      ctx.worker.metrics().tenant_rejections.Add({t->name, "budget"});
      return Rejection{ErrorKind::kBudgetExceeded, "tenant monthly budget is spent",
                       static_cast<int>(accounting::BudgetRetryAfterSeconds(now_ms))};
    }
    if (!ctx.tenant_slot.Acquire(state, t->max_concurrent)) {
      ctx.worker.metrics().tenant_rejections.Add({t->name, "concurrency"});
      return Rejection{ErrorKind::kRateLimited, "tenant concurrent request limit exceeded", 1};
    }
  }

  // The body is read (model, stream, residency) and may be rewritten: a
  // coded one (gzip) could be neither. identity is no coding.
  for (auto [f, end] = ctx.req.base().equal_range(http::field::content_encoding); f != end; ++f)
    if (std::string_view coding = ContentCodingOf(f->value()); !coding.empty())
      return Rejection{ErrorKind::kEncodedBody,
                       "request body has Content-Encoding " + std::string(coding) +
                           ", which the gateway cannot read: send it unencoded"};
  body = common::MakePooled<RequestBody>(RequestBody::Parse(ctx.req.body()));
  const BodyFacts& facts = body->facts();
  switch (facts.status) {
    case BodyFacts::Status::kOk:
      break;
    case BodyFacts::Status::kInvalidJson:
    case BodyFacts::Status::kNotObject:
      return Rejection{ErrorKind::kInvalidJson, facts.error};
    case BodyFacts::Status::kMissingModel:
      return Rejection{ErrorKind::kMissingModel, facts.error};
  }
  ctx.stream = facts.stream;
  ctx.include_usage = facts.include_usage;
  std::optional<size_t> model = ctx.cfg.FindModel(facts.model);
  if (!model || ctx.cfg.backends_by_model[*model].empty())
    return Rejection{ErrorKind::kModelNotFound,
                     "The model '" + std::string(facts.model) + "' does not exist"};
  ctx.model = *model;

  ResolveGeo(ctx);
  if (std::optional<Refusal> refusal = ResidencyRefusal(ctx))
    return Rejection{refusal->kind, std::move(refusal->message)};
  return std::nullopt;
}

net::awaitable<bool> HandleInference(RequestContext& ctx) {
  common::PooledPtr<RequestBody> body;
  if (std::optional<Rejection> rejection = AdmitInference(ctx, body))
    return Reject(ctx, std::move(*rejection));
  return ProxyRequest(ctx, std::move(body));
}

// on_request: routing looks at, and the backend gets, only the normalised
// path (request_target.h). A normalised target replaces the request's own,
// which is what the proxy forwards. Not a coroutine, and nothing added to
// RequestContext, which every open stream holds.
// @return the refusal's text, empty when the target is accepted.
std::string_view AcceptTarget(RequestContext& ctx) {
  std::string_view target = ctx.req.target();
  std::string storage;  // used only when the target is not already normal
  RequestTarget normal = NormalizeRequestTarget(target, storage);
  if (!normal.ok) {
    ctx.path = target.substr(0, target.find('?'));  // logged as sent
    return normal.error;
  }
  if (normal.target.data() == target.data()) {
    ctx.path = normal.path;
    return {};
  }
  size_t path_size = normal.path.size();
  ctx.req.target(normal.target);
  ctx.path = ctx.req.target().substr(0, path_size);
  return {};
}

// The request-end record of a served request, charged once: the worker's
// showback buckets and metrics, and the tenant's budget.
void Charge(RequestContext& ctx, const accounting::ShowbackRecord& rec) {
  ctx.worker.showback_ledger().Add(rec);
  WorkerMetrics& m = ctx.worker.metrics();
  m.showback.Add(rec);
  if (ctx.tenant != kNoIndex) ctx.rt.budgets[ctx.tenant]->Charge(rec.cost, rec.unix_ms);
  std::string_view tenant = rec.tenant.empty() ? std::string_view("none") : rec.tenant;
  if (rec.prompt_tokens > 0)
    m.tokens.Add({rec.backend, rec.model, tenant, "prompt"},
                 static_cast<double>(rec.prompt_tokens));
  if (rec.completion_tokens > 0)
    m.tokens.Add({rec.backend, rec.model, tenant, "completion"},
                 static_cast<double>(rec.completion_tokens));
}

// The end of every request: its accounting, its metrics and its access-log
// line, all from what the request context holds.
void Log(RequestContext& ctx) {
  if (ctx.usage) Charge(ctx, *ctx.usage);
  CountResidency(ctx);
  // A relay's end is the request's (no wait comes between it and here).
  health::MonotonicTime end = ctx.end_time();
  double duration_s = std::chrono::duration<double>(end - ctx.start).count();
  const config::Backend* b = ctx.backend == kNoIndex ? nullptr : &ctx.cfg.backends[ctx.backend];
  std::string_view backend = b ? std::string_view(b->name) : "none";
  std::string_view region = b ? std::string_view(ctx.cfg.regions[b->region_index].name) : "none";
  const config::Tenant* tenant = ctx.tenant_config();
  WorkerMetrics& m = ctx.worker.metrics();
  m.requests.Add({backend, region, b ? std::string_view(b->gpu) : "none",
                  b ? std::string_view(b->provider) : "none",
                  ctx.model == kNoIndex ? "none" : ctx.model_name(),
                  tenant ? std::string_view(tenant->name) : "none", StatusLabel(ctx.status)});
  if (b) m.duration.Observe({backend}, duration_s);
  if (ctx.trace) EndRequestTrace(ctx, end);

  observability::AccessLogBuffer& log = ctx.worker.access_log();
  if (!log.enabled()) return;
  std::string allowed = routing::RegionNames(ctx.cfg, ctx.residency.allowed);
  observability::AccessRecord r;
  r.unix_ms = ctx.usage ? ctx.usage->unix_ms
                        : std::chrono::duration_cast<std::chrono::milliseconds>(
                              ctx.worker.time().system().time_since_epoch())
                              .count();
  r.request_id = ctx.request_id;
  r.edge = ctx.cfg.gateway.edge;
  r.client_ip = ctx.client_ip_text;
  r.method = ctx.req.method_string();
  r.path = ctx.path;
  r.model = ctx.model_name();
  r.tenant = tenant ? std::string_view(tenant->name) : std::string_view();
  r.status = ctx.status;
  r.outcome = ctx.outcome;
  r.error_code = ctx.error_code;
  r.upstream_error = ctx.upstream_error;
  r.backend = b ? backend : std::string_view();
  r.region = b ? region : std::string_view();
  r.stream = ctx.stream;
  r.ttft_ms = ctx.ttft_ms;
  r.duration_ms = duration_s * 1000;
  r.bytes_in = ctx.bytes_in;
  r.bytes_out = ctx.bytes_out;
  r.attempts = ctx.attempts;
  r.route_reason = ctx.route_reason;
  r.country = ctx.geo.country;
  r.continent = ctx.geo.continent;
  r.rule = ctx.residency.RuleLabel(ctx.cfg);
  r.allowed = allowed;
  r.policy_hash = ctx.cfg.hash;
  r.generation = ctx.rt.generation;
  r.geo_epoch = ctx.rt.geo_epoch;
  if (ctx.usage) {
    // Estimated counts come from SSE events alone: the prompt's is unknown.
    r.prompt_tokens = ctx.usage->estimated ? -1 : ctx.usage->prompt_tokens;
    r.completion_tokens = ctx.usage->completion_tokens;
    r.tokens_estimated = ctx.usage->estimated;
    r.gpu_seconds = ctx.usage->gpu_seconds;
    r.cost = ctx.usage->cost;
  }
  log.Append(r);
}

}  // namespace

// In a block of the worker's cache, not in HandleRequest's frame: with the
// context inside (728 bytes of it) the frame was 1344 bytes, past the
// cache's largest class, and every request paid a malloc and a free for it.
static_assert(sizeof(RequestContext) <= common::block_cache::kLargestBlock);

namespace {

// Which answer a request gets (on_request). Not a coroutine: the one it
// picks is the only frame below HandleRequest's, and a stream holds the
// frames of its chain for its whole life.
net::awaitable<bool> Dispatch(RequestContext& ctx) {
  const Request& req = ctx.req;
  // HEAD is answered wherever GET is, without a body.
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  // A models.retrieve target carries its id percent-encoded (an id may hold
  // a '/'): it is answered here and never forwarded, so it is taken before
  // the target rules for what goes upstream.
  std::optional<std::string> model_id = get ? ModelIdOfTarget(req.target()) : std::nullopt;
  if (model_id) ctx.path = req.target().substr(0, req.target().find('?'));
  // The target first: it sets the path the access log records. The
  // refusals' texts are literals: they outlive this function.
  std::string_view refusal = model_id ? std::string_view() : AcceptTarget(ctx);
  if (!refusal.empty()) return Fail(ctx, ErrorKind::kBadRequest, refusal);
  if (std::optional<HeadRefusal> head_refusal = CheckRequestHead(req.base(), req.version()))
    return Fail(ctx, head_refusal->kind, head_refusal->message);
  if (PreflightVerdict preflight = Preflight(ctx); preflight != PreflightVerdict::kNotPreflight)
    return AnswerPreflight(ctx, preflight);
  if (model_id) return HandleModel(ctx, std::move(*model_id));
  if (ctx.path == "/v1/models" && get) return HandleModels(ctx);
  if (req.method() == http::verb::post && ctx.path.starts_with("/v1/")) return HandleInference(ctx);
  return Reject(ctx, Rejection{ErrorKind::kNotFound,
                               "Unknown request URL: " + std::string(req.method_string()) + " " +
                                   std::string(ctx.path)});
}

// The request's id, size and trace, and the count of active requests.
// Not in HandleRequest: GCC keeps a coroutine's locals in its frame.
void BeginRequest(RequestContext& ctx) {
  std::string_view rid = ctx.req["x-request-id"];
  if (IsAcceptableRequestId(rid)) {
    ctx.request_id.assign(rid);
  } else {
    GeneratedRequestId id = NewRequestId();
    ctx.request_id.assign(id.data(), id.size());
  }
  ctx.bytes_in = ctx.req.body().size();
  if (ctx.rt.tracer) StartRequestTrace(ctx);
  ctx.worker.shared().active_requests.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

net::awaitable<bool> HandleRequest(Session& session, const PinnedRuntime& pinned, Request& req) {
  common::PooledPtr<RequestContext> owned =
      common::MakePooled<RequestContext>(session, pinned, req);
  RequestContext& ctx = *owned;
  BeginRequest(ctx);
  bool keep = co_await Dispatch(ctx);
  ctx.worker.shared().active_requests.fetch_sub(1, std::memory_order_relaxed);
  Log(ctx);
  co_return keep;
}

}  // namespace geogate::proxy

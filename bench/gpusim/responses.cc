#include "bench/gpusim/responses.h"

#include <array>
#include <charconv>
#include <cmath>
#include <span>

#include <openssl/evp.h>
#include <boost/endian/buffers.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "common/splitmix64.h"

namespace gpusim {
namespace json = boost::json;
namespace {

std::string escape_json(std::string_view text) {
  std::string quoted = json::serialize(json::string(text));
  return quoted.substr(1, quoted.size() - 2);
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

ApiError bad_request(std::string code, std::string message) {
  return ApiError{400, "invalid_request_error", std::move(code), std::move(message)};
}

// Words in a message `content`: a string, or an array of parts of which the
// {"type":"text","text":...} ones count.
int64_t count_content_words(const json::value& content) {
  if (const auto* s = content.if_string()) return count_words(*s);
  int64_t words = 0;
  if (const auto* parts = content.if_array()) {
    for (const auto& part : *parts) {
      if (const auto* o = part.if_object()) {
        if (const auto* text = o->if_contains("text"); text && text->is_string()) {
          words += count_words(text->get_string());
        }
      }
    }
  }
  return words;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The embeddings `input`: a string, an array of strings, an array of token
// ids, or an array of arrays of token ids.
bool parse_embedding_input(const json::value& input, GenerationRequest& out) {
  auto add_text = [&out](std::string_view s) {
    out.embedding_seeds.push_back(fnv1a(s));
    return count_words(s);
  };
  auto add_tokens = [&out](const json::array& tokens) {
    std::string key;
    for (const auto& t : tokens) {
      if (!t.is_int64()) return int64_t{-1};
      key += std::to_string(t.get_int64());
      key += ',';
    }
    out.embedding_seeds.push_back(fnv1a(key));
    return static_cast<int64_t>(tokens.size());
  };
  int64_t words = 0;
  if (const auto* s = input.if_string()) {
    words = add_text(*s);
  } else if (const auto* a = input.if_array()) {
    if (a->empty()) return false;
    if (a->front().is_int64()) {
      words = add_tokens(*a);
      if (words < 0) return false;
    } else {
      for (const auto& item : *a) {
        int64_t n = -1;
        if (const auto* s = item.if_string()) {
          n = add_text(*s);
        } else if (const auto* tokens = item.if_array()) {
          n = add_tokens(*tokens);
        }
        if (n < 0) return false;
        words += n;
      }
    }
  } else {
    return false;
  }
  out.prompt_tokens = std::max<int64_t>(words, 1);
  return true;
}

// A Responses API `input`: a string, or a non-empty array of input items
// (objects) whose `content`, when present, is a string or an array of parts
// ({"type":"input_text","text":...} ones count). Adds its words to `words`.
bool count_input_words(const json::value& input, int64_t& words) {
  if (const auto* s = input.if_string()) {
    words += count_words(*s);
    return true;
  }
  const auto* items = input.if_array();
  if (!items || items->empty()) return false;
  for (const auto& item : *items) {
    const json::object* o = item.if_object();
    if (!o) return false;
    if (const auto* content = o->if_contains("content")) {
      if (!content->is_string() && !content->is_array()) return false;
      words += count_content_words(*content);
    }
  }
  return true;
}

constexpr size_t kEmbeddingDims = 8;

// Eight floats in [-1, 1] from a seed (splitmix64), scaled to unit length.
std::array<double, kEmbeddingDims> embedding_vector(uint64_t seed) {
  std::array<double, kEmbeddingDims> v;
  double norm = 0;
  for (double& x : v) {
    uint64_t z = geogate::SplitMix64(seed);
    x = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53) * 2.0 - 1.0;
    norm += x * x;
  }
  norm = std::sqrt(norm);
  for (double& x : v)
    x = norm > 0 ? x / norm : 0.0;
  return v;
}

// The `embedding` field: an array of numbers, or (encoding_format "base64")
// the vector as little-endian float32s, base64-encoded, as OpenAI sends it.
json::value embedding_value(uint64_t seed, bool base64) {
  const auto v = embedding_vector(seed);
  if (!base64) return json::array(v.begin(), v.end());
  std::array<boost::endian::little_float32_buf_t, kEmbeddingDims> raw;
  static_assert(sizeof raw == 4 * kEmbeddingDims);
  for (size_t i = 0; i < kEmbeddingDims; ++i)
    raw[i] = static_cast<float>(v[i]);
  std::array<unsigned char, 4 * ((sizeof raw + 2) / 3) + 1> text;  // + the NUL it writes
  const int n = EVP_EncodeBlock(text.data(), raw.front().data(), static_cast<int>(sizeof raw));
  return json::string(reinterpret_cast<const char*>(text.data()), static_cast<size_t>(n));
}

json::object usage_object(int64_t prompt, int64_t completion) {
  return json::object{{"prompt_tokens", prompt},
                      {"completion_tokens", completion},
                      {"total_tokens", prompt + completion}};
}

// The Responses API usage object.
json::object responses_usage(int64_t input, int64_t output) {
  return json::object{{"input_tokens", input},
                      {"input_tokens_details", json::object{{"cached_tokens", 0}}},
                      {"output_tokens", output},
                      {"output_tokens_details", json::object{{"reasoning_tokens", 0}}},
                      {"total_tokens", input + output}};
}

// The output message's id, from the response's: resp_X -> msg_X.
std::string message_id(std::string_view response_id) {
  constexpr std::string_view kPrefix = "resp_";
  if (response_id.starts_with(kPrefix)) response_id.remove_prefix(kPrefix.size());
  return "msg_" + std::string(response_id);
}

// An output_text content part.
json::object output_text_part(std::string_view text) {
  return json::object{{"type", "output_text"},
                      {"text", text},
                      {"annotations", json::array{}},
                      {"logprobs", json::array{}}};
}

// The assistant message output item; no text yet while in progress.
json::object message_item(std::string_view msg_id, const std::string* text) {
  json::array content;
  if (text) content.push_back(output_text_part(*text));
  return json::object{{"type", "message"},
                      {"id", msg_id},
                      {"status", text ? "completed" : "in_progress"},
                      {"role", "assistant"},
                      {"content", std::move(content)}};
}

// The Response object, with the fields OpenAI returns (SDKs read id,
// created_at, model, status, error, incomplete_details, output and usage).
// `text` null: in progress, no output and no usage yet.
json::object response_object(const GenerationRequest& r, std::string_view model,
                             std::string_view id, int64_t created, const std::string* text) {
  json::array output;
  if (text) output.push_back(message_item(message_id(id), text));
  json::value instructions = nullptr;
  if (r.instructions) instructions = *r.instructions;
  json::value max_output_tokens = nullptr;
  if (r.max_output_tokens) max_output_tokens = *r.max_output_tokens;
  json::value usage = nullptr;
  if (text) usage = responses_usage(r.prompt_tokens, r.completion_tokens);
  return json::object{{"id", id},
                      {"object", "response"},
                      {"created_at", created},
                      {"status", text ? "completed" : "in_progress"},
                      {"error", nullptr},
                      {"incomplete_details", nullptr},
                      {"instructions", std::move(instructions)},
                      {"max_output_tokens", std::move(max_output_tokens)},
                      {"model", model},
                      {"output", std::move(output)},
                      {"parallel_tool_calls", true},
                      {"previous_response_id", nullptr},
                      {"reasoning", json::object{{"effort", nullptr}, {"summary", nullptr}}},
                      {"store", false},
                      {"temperature", 1.0},
                      {"text", json::object{{"format", json::object{{"type", "text"}}}}},
                      {"tool_choice", "auto"},
                      {"tools", json::array{}},
                      {"top_p", 1.0},
                      {"truncation", "disabled"},
                      {"usage", std::move(usage)},
                      {"user", nullptr},
                      {"metadata", json::object{}}};
}

// Appends `payload` framed as one HTTP chunk, or raw for an HTTP/1.0 client.
void append_frame(std::string& out, std::string_view payload, bool chunked) {
  if (!chunked) {
    out += payload;
    return;
  }
  char hex[16];
  auto [end, ec] = std::to_chars(hex, hex + sizeof hex, payload.size(), 16);
  out.append(hex, end);
  out += "\r\n";
  out += payload;
  out += "\r\n";
}

// Appends one Responses API SSE event, `event:` line and `data:` JSON (whose
// "type" and "sequence_number" come first), framed.
void append_event(std::string& out, bool chunked, std::string_view type, int64_t sequence,
                  json::object fields) {
  json::object data{{"type", type}, {"sequence_number", sequence}};
  for (auto& field : fields)
    data.emplace(field.key(), std::move(field.value()));
  std::string payload = "event: ";
  payload += type;
  payload += "\ndata: ";
  payload += json::serialize(data);
  payload += "\n\n";
  append_frame(out, payload, chunked);
}

}  // namespace

std::string token_text(std::string_view name, int64_t i) {
  std::string out(name);
  out += ':';
  append_int(out, i);
  out += ' ';
  return out;
}

int64_t count_words(std::string_view text) {
  int64_t words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

std::string error_body(const ApiError& error) {
  json::object e{{"message", error.message}, {"type", error.type}, {"code", error.code}};
  return json::serialize(json::object{{"error", std::move(e)}});
}

ResponseFactory::ResponseFactory(const Options& options)
    : name_(options.name),
      region_(options.region),
      models_(options.models),
      escaped_name_(escape_json(options.name)),
      default_tokens_(options.tokens),
      max_tokens_cap_(options.max_tokens_cap),
      usage_null_chunks_(options.usage_null_chunks) {
  for (const auto& m : models_)
    escaped_models_.push_back(escape_json(m));
}

std::variant<GenerationRequest, ApiError> ResponseFactory::parse(Endpoint endpoint,
                                                                 std::string_view body) const {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return bad_request("invalid_json", "request body is not valid JSON: " + ec.message());
  const json::object* o = doc.if_object();
  if (!o) return bad_request("invalid_json", "request body must be a JSON object");

  GenerationRequest r;
  r.endpoint = endpoint;
  const json::value* model = o->if_contains("model");
  if (!model || !model->is_string()) {
    return bad_request("missing_model", "'model' is required and must be a string");
  }
  const std::string_view model_name = model->get_string();
  size_t index = 0;
  while (index < models_.size() && models_[index] != model_name)
    ++index;
  if (index == models_.size()) {
    return ApiError{
        404, "invalid_request_error", "model_not_found",
        "The model '" + std::string(model_name) + "' does not exist on backend " + name_};
  }
  r.model = index;

  if (endpoint == Endpoint::kEmbedding) {
    const json::value* input = o->if_contains("input");
    if (!input || !parse_embedding_input(*input, r)) {
      return bad_request("bad_request",
                         "'input' must be a string, an array of strings or of token arrays");
    }
    if (const json::value* f = o->if_contains("encoding_format"); f && !f->is_null()) {
      const json::string* format = f->if_string();
      if (format && *format == "base64") {
        r.base64 = true;
      } else if (!format || *format != "float") {
        return bad_request("bad_request", "'encoding_format' must be \"float\" or \"base64\"");
      }
    }
    return r;
  }

  int64_t words = 0;
  if (endpoint == Endpoint::kResponses) {
    const json::value* input = o->if_contains("input");
    if (!input || !count_input_words(*input, words)) {
      return bad_request("bad_request",
                         "'input' must be a string or a non-empty array of input items, each an "
                         "object whose 'content' is a string or an array of parts");
    }
    if (const json::value* i = o->if_contains("instructions"); i && !i->is_null()) {
      if (!i->is_string()) return bad_request("bad_request", "'instructions' must be a string");
      r.instructions = std::string(i->get_string());
      words += count_words(*r.instructions);
    }
  } else if (endpoint == Endpoint::kChat) {
    const json::value* messages = o->if_contains("messages");
    if (!messages || !messages->is_array() || messages->get_array().empty()) {
      return bad_request("bad_request", "'messages' must be a non-empty array");
    }
    for (const auto& m : messages->get_array()) {
      const json::object* msg = m.if_object();
      if (!msg) return bad_request("bad_request", "every message must be an object");
      if (const auto* content = msg->if_contains("content")) words += count_content_words(*content);
    }
  } else {
    const json::value* prompt = o->if_contains("prompt");
    if (!prompt) return bad_request("bad_request", "'prompt' is required");
    if (const auto* s = prompt->if_string()) {
      words = count_words(*s);
    } else if (const auto* a = prompt->if_array()) {
      for (const auto& p : *a) {
        if (const auto* s = p.if_string()) words += count_words(*s);
      }
    } else {
      return bad_request("bad_request", "'prompt' must be a string or an array of strings");
    }
  }
  r.prompt_tokens = std::max<int64_t>(words, 1);

  r.completion_tokens = default_tokens_;
  // max_completion_tokens is looked at last, so it wins over max_tokens.
  static constexpr std::string_view kChatLimits[] = {"max_tokens", "max_completion_tokens"};
  static constexpr std::string_view kResponsesLimits[] = {"max_output_tokens"};
  const std::span<const std::string_view> limits =
      endpoint == Endpoint::kResponses ? std::span<const std::string_view>(kResponsesLimits)
                                       : std::span<const std::string_view>(kChatLimits);
  for (std::string_view key : limits) {
    const json::value* v = o->if_contains(key);
    if (!v || v->is_null()) continue;
    if (!v->is_int64() || v->get_int64() < 1) {
      return bad_request("bad_request", "'" + std::string(key) + "' must be a positive integer");
    }
    r.completion_tokens = std::min(v->get_int64(), max_tokens_cap_);
    if (endpoint == Endpoint::kResponses) r.max_output_tokens = v->get_int64();
  }
  if (const json::value* s = o->if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return bad_request("bad_request", "'stream' must be a boolean");
    r.stream = s->get_bool();
  }
  // The Responses API always reports usage, in response.completed.
  const json::value* so =
      endpoint == Endpoint::kResponses ? nullptr : o->if_contains("stream_options");
  if (so && so->is_object()) {
    if (const json::value* u = so->get_object().if_contains("include_usage")) {
      r.include_usage = u->is_bool() && u->get_bool();
    }
  }
  return r;
}

std::string ResponseFactory::full_body(const GenerationRequest& r, std::string_view id,
                                       int64_t created) const {
  const std::string& model = models_[r.model];
  if (r.endpoint == Endpoint::kEmbedding) {
    json::array data;
    for (size_t i = 0; i < r.embedding_seeds.size(); ++i) {
      data.push_back(json::object{{"object", "embedding"},
                                  {"index", i},
                                  {"embedding", embedding_value(r.embedding_seeds[i], r.base64)}});
    }
    return json::serialize(json::object{
        {"object", "list"},
        {"data", std::move(data)},
        {"model", model},
        {"usage",
         json::object{{"prompt_tokens", r.prompt_tokens}, {"total_tokens", r.prompt_tokens}}}});
  }
  std::string text = completion_text(r.completion_tokens);
  if (r.endpoint == Endpoint::kResponses) {
    return json::serialize(response_object(r, model, id, created, &text));
  }
  json::object choice{{"index", 0}, {"finish_reason", "stop"}};
  if (r.endpoint == Endpoint::kChat) {
    choice["message"] = json::object{{"role", "assistant"}, {"content", std::move(text)}};
  } else {
    choice["text"] = std::move(text);
    choice["logprobs"] = nullptr;
  }
  return json::serialize(json::object{
      {"id", id},
      {"object", r.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
      {"created", created},
      {"model", model},
      {"choices", json::array{std::move(choice)}},
      {"usage", usage_object(r.prompt_tokens, r.completion_tokens)}});
}

std::string ResponseFactory::completion_text(int64_t tokens) const {
  std::string text;
  text.reserve(static_cast<size_t>(tokens) * (name_.size() + 8));
  for (int64_t i = 0; i < tokens; ++i) {
    text += name_;
    text += ':';
    append_int(text, i);
    text += ' ';
  }
  return text;
}

std::string ResponseFactory::models_body() const {
  json::array data;
  for (const auto& m : models_) {
    data.push_back(
        json::object{{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", name_}});
  }
  return json::serialize(json::object{{"object", "list"}, {"data", std::move(data)}});
}

std::string ResponseFactory::health_body(int64_t inflight, int64_t queue_depth,
                                         double utilization) const {
  return json::serialize(json::object{{"status", "ok"},
                                      {"backend", name_},
                                      {"region", region_},
                                      {"inflight", inflight},
                                      {"queue_depth", queue_depth},
                                      {"kv_cache_utilization", utilization}});
}

std::string ResponseFactory::metrics_body(int64_t running, int64_t waiting, double utilization,
                                          uint64_t prompt_tokens,
                                          uint64_t generation_tokens) const {
  // Label values escape backslash, quote and newline (Prometheus text format).
  std::string label;
  for (char c : models_.front()) {
    if (c == '\\' || c == '"') label += '\\';
    if (c == '\n') {
      label += "\\n";
      continue;
    }
    label += c;
  }
  const std::string l = "{model_name=\"" + label + "\"}";
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& v) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " " + type + "\n";
    out += name + l + " " + v + "\n";
  };
  metric("vllm:num_requests_running", "gauge", "Number of requests currently running on GPU.",
         std::to_string(running));
  metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
         std::to_string(waiting));
  metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.",
         std::to_string(utilization));
  metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
         std::to_string(prompt_tokens));
  metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
         std::to_string(generation_tokens));
  return out;
}

void SseWriter::begin(const ResponseFactory& factory, const GenerationRequest& r,
                      std::string_view id, int64_t created, bool chunked) {
  endpoint_ = r.endpoint;
  chunked_ = chunked;
  close_ = factory.usage_null_chunks() && r.include_usage ? ",\"usage\":null}" : "}";
  name_ = factory.escaped_name();
  prologue_.clear();
  epilogue_.clear();
  if (endpoint_ == Endpoint::kResponses) {
    begin_responses(factory, r, id, created);
    return;
  }
  const bool chat = endpoint_ == Endpoint::kChat;
  head_ = "data: {\"id\":\"";
  head_ += id;
  head_ += chat ? "\",\"object\":\"chat.completion.chunk\",\"created\":"
                : "\",\"object\":\"text_completion\",\"created\":";
  append_int(head_, created);
  head_ += ",\"model\":\"";
  head_ += factory.escaped_model(r.model);
  head_ += "\",";
}

// The Responses API stream in OpenAI's order: sequence numbers 0-3 for the
// prologue, 4+i for token i, then the four closing events. Only the deltas
// are formatted per token; the rest is built here, once.
void SseWriter::begin_responses(const ResponseFactory& factory, const GenerationRequest& r,
                                std::string_view id, int64_t created) {
  const std::string& model = factory.model(r.model);
  const std::string msg_id = message_id(id);
  const int64_t n = r.completion_tokens;
  const std::string text = factory.completion_text(n);
  auto location = [&msg_id] {
    return json::object{{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}};
  };
  auto with = [](json::object o, json::object more) {
    for (auto& field : more)
      o.emplace(field.key(), std::move(field.value()));
    return o;
  };

  const json::object started = response_object(r, model, id, created, nullptr);
  append_event(prologue_, chunked_, "response.created", 0, {{"response", started}});
  append_event(prologue_, chunked_, "response.in_progress", 1, {{"response", started}});
  append_event(prologue_, chunked_, "response.output_item.added", 2,
               {{"output_index", 0}, {"item", message_item(msg_id, nullptr)}});
  append_event(prologue_, chunked_, "response.content_part.added", 3,
               with(location(), {{"part", output_text_part("")}}));

  append_event(epilogue_, chunked_, "response.output_text.done", 4 + n,
               with(location(), {{"text", text}, {"logprobs", json::array{}}}));
  append_event(epilogue_, chunked_, "response.content_part.done", 5 + n,
               with(location(), {{"part", output_text_part(text)}}));
  append_event(epilogue_, chunked_, "response.output_item.done", 6 + n,
               {{"output_index", 0}, {"item", message_item(msg_id, &text)}});
  append_event(epilogue_, chunked_, "response.completed", 7 + n,
               {{"response", response_object(r, model, id, created, &text)}});

  head_ =
      "event: response.output_text.delta\n"
      "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":";
  item_ = ",\"item_id\":\"";
  item_ += msg_id;  // resp_/msg_ ids need no escaping
  item_ += "\",\"output_index\":0,\"content_index\":0,\"delta\":\"";
}

const std::string& SseWriter::prologue() {
  return prologue_;
}

const std::string& SseWriter::token(int64_t i) {
  payload_ = head_;
  if (endpoint_ == Endpoint::kResponses) {
    append_int(payload_, 4 + i);
    payload_ += item_;
  } else if (endpoint_ == Endpoint::kChat) {
    payload_ += i == 0
                    ? "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\""
                    : "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"";
  } else {
    payload_ += "\"choices\":[{\"index\":0,\"text\":\"";
  }
  payload_ += name_;
  payload_ += ':';
  append_int(payload_, i);
  if (endpoint_ == Endpoint::kResponses) {
    payload_ += " \",\"logprobs\":[]}\n\n";
    return frame();
  }
  payload_ += endpoint_ == Endpoint::kChat ? " \"},\"finish_reason\":null}]"
                                           : " \",\"logprobs\":null,\"finish_reason\":null}]";
  payload_ += close_;
  payload_ += "\n\n";
  return frame();
}

const std::string& SseWriter::finish() {
  if (endpoint_ == Endpoint::kResponses) return epilogue_;
  payload_ = head_;
  payload_ += endpoint_ == Endpoint::kChat
                  ? "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]"
                  : "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,"
                    "\"finish_reason\":\"stop\"}]";
  payload_ += close_;
  payload_ += "\n\n";
  return frame();
}

const std::string& SseWriter::usage(int64_t prompt_tokens, int64_t completion_tokens) {
  payload_ = head_;
  payload_ += "\"choices\":[],\"usage\":{\"prompt_tokens\":";
  append_int(payload_, prompt_tokens);
  payload_ += ",\"completion_tokens\":";
  append_int(payload_, completion_tokens);
  payload_ += ",\"total_tokens\":";
  append_int(payload_, prompt_tokens + completion_tokens);
  payload_ += "}}\n\n";
  return frame();
}

const std::string& SseWriter::done() {
  out_.clear();
  // The Responses API ends with response.completed, no [DONE].
  if (endpoint_ != Endpoint::kResponses) append_frame(out_, "data: [DONE]\n\n", chunked_);
  // The terminating zero-size chunk rides in the same write as the last event.
  if (chunked_) out_ += "0\r\n\r\n";
  return out_;
}

const std::string& SseWriter::frame() {
  out_.clear();
  append_frame(out_, payload_, chunked_);
  return out_;
}

}  // namespace gpusim

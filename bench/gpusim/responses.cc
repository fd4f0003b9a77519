#include "bench/gpusim/responses.h"

#include <array>
#include <charconv>
#include <cmath>

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
      max_tokens_cap_(options.max_tokens_cap) {
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
  if (endpoint == Endpoint::kChat) {
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
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    // max_completion_tokens is looked at last, so it wins over max_tokens.
    const json::value* v = o->if_contains(key);
    if (!v || v->is_null()) continue;
    if (!v->is_int64() || v->get_int64() < 1) {
      return bad_request("bad_request", std::string("'") + key + "' must be a positive integer");
    }
    r.completion_tokens = std::min(v->get_int64(), max_tokens_cap_);
  }
  if (const json::value* s = o->if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return bad_request("bad_request", "'stream' must be a boolean");
    r.stream = s->get_bool();
  }
  if (const json::value* so = o->if_contains("stream_options"); so && so->is_object()) {
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
  std::string text;
  text.reserve(static_cast<size_t>(r.completion_tokens) * (name_.size() + 8));
  for (int64_t i = 0; i < r.completion_tokens; ++i) {
    text += name_;
    text += ':';
    append_int(text, i);
    text += ' ';
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
  chat_ = r.endpoint == Endpoint::kChat;
  chunked_ = chunked;
  name_ = factory.escaped_name();
  head_ = "data: {\"id\":\"";
  head_ += id;
  head_ += chat_ ? "\",\"object\":\"chat.completion.chunk\",\"created\":"
                 : "\",\"object\":\"text_completion\",\"created\":";
  append_int(head_, created);
  head_ += ",\"model\":\"";
  head_ += factory.escaped_model(r.model);
  head_ += "\",";
}

const std::string& SseWriter::token(int64_t i) {
  payload_ = head_;
  if (chat_) {
    payload_ += i == 0
                    ? "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\""
                    : "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"";
  } else {
    payload_ += "\"choices\":[{\"index\":0,\"text\":\"";
  }
  payload_ += name_;
  payload_ += ':';
  append_int(payload_, i);
  payload_ += chat_ ? " \"},\"finish_reason\":null}]}\n\n"
                    : " \",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  return frame();
}

const std::string& SseWriter::finish() {
  payload_ = head_;
  payload_ += chat_ ? "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                    : "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,"
                      "\"finish_reason\":\"stop\"}]}\n\n";
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
  payload_ = "data: [DONE]\n\n";
  frame();
  // The terminating zero-size chunk rides in the same write as the last event.
  if (chunked_) out_ += "0\r\n\r\n";
  return out_;
}

const std::string& SseWriter::frame() {
  out_.clear();
  if (!chunked_) {
    out_ += payload_;
    return out_;
  }
  char hex[16];
  auto [end, ec] = std::to_chars(hex, hex + sizeof hex, payload_.size(), 16);
  out_.append(hex, end);
  out_ += "\r\n";
  out_ += payload_;
  out_ += "\r\n";
  return out_;
}

}  // namespace gpusim

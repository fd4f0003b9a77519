// OpenAI-shaped request parsing and response bodies, with no I/O: the
// session decides when to send, these decide what.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bench/gpusim/options.h"

namespace gpusim {

/// /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses.
enum class Endpoint { kChat, kCompletion, kEmbedding, kResponses };

/// An OpenAI-shaped error: {"error":{"message","type","code"}}.
struct ApiError {
  unsigned status = 400;
  std::string type = "invalid_request_error";
  std::string code;
  std::string message;
};
std::string error_body(const ApiError& error);

/// What a /v1 generation request asks for, once parsed and validated.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::kChat;
  size_t model = 0;  // index into the served models
  bool stream = false;
  bool include_usage = false;
  int64_t completion_tokens = 0;  // 0 for embeddings
  int64_t prompt_tokens = 1;
  std::vector<uint64_t> embedding_seeds;  // one per embeddings input
  bool base64 = false;                    // embeddings: encoding_format "base64"
  // Responses API: echoed in the Response object as OpenAI does.
  std::optional<std::string> instructions;
  std::optional<int64_t> max_output_tokens;
};

/// The simulator's fixed identity (name, region, models), pre-escaped once
/// so per-token output needs no JSON encoder.
class ResponseFactory {
 public:
  explicit ResponseFactory(const Options& options);

  /// Parses a /v1 POST body. Unknown model -> 404 model_not_found; bad JSON
  /// or shape -> 400.
  std::variant<GenerationRequest, ApiError> parse(Endpoint endpoint, std::string_view body) const;

  /// The whole non-streamed body of a chat/completion/embeddings/responses
  /// answer.
  std::string full_body(const GenerationRequest& request, std::string_view id,
                        int64_t created) const;
  /// The generated text of `tokens` tokens: token_text(name, 0..tokens-1).
  std::string completion_text(int64_t tokens) const;
  std::string models_body() const;
  std::string health_body(int64_t inflight, int64_t queue_depth, double utilization) const;
  /// vLLM-style Prometheus text.
  std::string metrics_body(int64_t running, int64_t waiting, double utilization,
                           uint64_t prompt_tokens, uint64_t generation_tokens) const;

  const std::string& name() const { return name_; }
  const std::string& region() const { return region_; }
  const std::string& model(size_t i) const { return models_[i]; }
  const std::string& escaped_name() const { return escaped_name_; }
  const std::string& escaped_model(size_t i) const { return escaped_models_[i]; }
  /// Options::usage_null_chunks.
  bool usage_null_chunks() const { return usage_null_chunks_; }

 private:
  std::string name_;
  std::string region_;
  std::vector<std::string> models_;
  std::string escaped_name_;
  std::vector<std::string> escaped_models_;
  int64_t default_tokens_;
  int64_t max_tokens_cap_;
  bool usage_null_chunks_;
};

/// Formats one stream's SSE events, each framed as one HTTP chunk (or raw for
/// an HTTP/1.0 client). Buffers are reused: no allocation per token once warm.
///
/// Chat and completions: token chunks, the finish chunk, the usage chunk, then
/// `data: [DONE]`. Responses API: the prologue (response.created,
/// response.in_progress, response.output_item.added,
/// response.content_part.added), one response.output_text.delta per token,
/// then the closing events up to response.completed; every event carries
/// `event:`, `type` and a `sequence_number`, and there is no [DONE].
class SseWriter {
 public:
  void begin(const ResponseFactory& factory, const GenerationRequest& request, std::string_view id,
             int64_t created, bool chunked);

  /// Responses API: the events before the first token (empty otherwise).
  const std::string& prologue();
  /// Token i (0-based); in a chat stream the first carries the assistant role.
  const std::string& token(int64_t i);
  /// The chunk with finish_reason "stop"; for the Responses API every
  /// closing event, response.completed (with usage) last.
  const std::string& finish();
  /// The choices:[] chunk with usage (chat and completions).
  const std::string& usage(int64_t prompt_tokens, int64_t completion_tokens);
  /// `data: [DONE]` (not for the Responses API) followed by the end of the
  /// chunked body.
  const std::string& done();

 private:
  void begin_responses(const ResponseFactory& factory, const GenerationRequest& request,
                       std::string_view id, int64_t created);
  const std::string& frame();

  Endpoint endpoint_ = Endpoint::kChat;
  bool chunked_ = true;
  // Chat/completions: `}` or `,"usage":null}` (the factory's chunk shape,
  // when the request asked for usage), closing each chunk but usage's.
  std::string_view close_ = "}";
  // Chat/completions: `data: {"id":..,"object":..,"created":..,"model":..,`.
  // Responses: `event: response.output_text.delta` up to `"sequence_number":`.
  std::string head_;
  std::string item_;      // Responses: `,"item_id":..,"content_index":0,"delta":"`
  std::string name_;      // escaped backend name
  std::string prologue_;  // Responses: built once in begin()
  std::string epilogue_;
  std::string payload_;
  std::string out_;
};

/// Token i's text: "{NAME}:{i} ".
std::string token_text(std::string_view name, int64_t i);
/// Whitespace-separated words in `text`.
int64_t count_words(std::string_view text);

}  // namespace gpusim

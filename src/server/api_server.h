// ApiServer: the OpenAI-compatible API over an EngineThread — routing, the generation
// endpoints (server/generation_job.h), tokenize/detokenize, models, health, Prometheus
// metrics, the dashboard and its JSON feed. Transport-neutral: handle() takes an HttpRequest
// and answers through an Exchange (server/http_exchange.h).
//
// Routes:
//   POST /v1/chat/completions, /v1/completions   generation (streaming or not)
//   POST /tokenize, /detokenize                  llama-server / vLLM shapes
//   GET  /v1/models, /v1/models/{id}             the served model, once per name (aliases)
//   GET  /health                                 200 {"status": "ok"}; 503 while draining
//   GET  /metrics                                Prometheus text (hinge:* names)
//   GET  /v1/stats                               the dashboard's JSON
//   GET  /                                       the dashboard (HTML + JS, no build step)
//   GET  /v1/usage                               the calling tenant's usage (tenants only)
//   POST /admin/reload                           re-read the tenants file (admin key)
//   POST /admin/tenants/{id}                     {"permission_version": N} (admin key)
//   POST /admin/tenants/{id}/purge               drop the tenant's cached blocks (admin key)
//
// Access (server/tenancy.h). With tenants (ApiServerConfig::tenants): /v1/*, /tokenize and
// /detokenize need a tenant's `Authorization: Bearer` key (401 without a valid one, 403 for an
// admin key); /metrics, /v1/stats, / and /admin/* need an admin key (401 / 403 for a tenant's
// key); /health is open. Or, with hinge serve --admin-port, those admin routes are on their own
// listener (127.0.0.1 by default) that needs no key, and the main one still takes admin keys. A request's prefix-cache namespace is its tenant's (plus its own
// cache_salt / prompt_cache_key), its priority is capped at the tenant's max_priority, and the
// tenant's max_concurrent caps its queued + running requests (429 + Retry-After). Without
// tenants: one shared namespace (salts still split it), and with api_key_digest the /v1/*,
// /tokenize and /detokenize routes need that key.
// HEAD works on every GET route (the transport drops the body); OPTIONS on a known path is 204
// with Allow (CORS preflights get their Access-Control-* headers from the transport). A known
// path with another method is 405 (with Allow); anything else 404. Every error body is OpenAI's
// {"error": {...}}.
//
// POST bodies (JSON parsing, chat templates, tokenization) are handled on RequestWorkers, never
// on the I/O thread that received them; a full worker queue is 503 + Retry-After. A text prompt
// whose byte length alone proves it longer than the context (bytes / the longest token's bytes
// >= the context) is refused before it is tokenized.
//
// Prompts: chat messages are rendered with the model's chat template (tokenizer.chat_template)
// when it has one; otherwise with the plain fallback: the messages' contents joined by "\n",
// no roles (so a single user message is exactly the completions prompt). The rendered text is
// tokenized with special tokens parsed, and BOS added unless the text already starts with it.
// Completion prompts are tokenized like `hinge run` (BOS per vocabulary, special-token text
// kept as text); token-id prompts are used as given.
//
// max_tokens: absent on completions -> 16 (OpenAI's default); absent on chat -> the rest of
// the context, capped to what one request may reserve in the KV cache. Given and too large for
// the context -> 400.
//
// Thread-safety: handle() may run on many I/O threads at once; everything it touches is
// immutable or thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "server/engine_thread.h"
#include "http/exchange.h"
#include "http/server.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/request_workers.h"
#include "server/tenant_registry.h"
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "chat/tool_format.h"
#include "tokenizer/tokenizer.h"

namespace hinge::server {

using http::CloseReason;
using http::Exchange;
using http::ExchangePtr;
using http::HttpHeaders;
using http::HttpRequest;
using http::HttpResponse;

struct ApiServerConfig {
  std::string model_name = "hinge";        // the id responses report
  std::vector<std::string> model_aliases;  // more names requests may use (vLLM's
                                           // --served-model-name a b: the first is the id)
  int32_t worker_threads = 2;              // RequestWorkers for POST bodies
  int32_t max_queued_bodies = 256;         // waiting for a worker; past it 503
  int32_t n_vocab = 0;
  CacheSecret cache_secret{};             // the namespaces' key (tenancy.h)
  std::vector<kv::KvTierStore*> kv_tiers;  // /metrics of the KV tiers (outlive the server)
  std::optional<KeyDigest> api_key_digest;  // --api-key without tenants
  std::shared_ptr<TenantRegistry> tenants;  // --tenants; null: one shared namespace
  double history_interval_s = 2.0;   // the dashboard's chart resolution
  bool log_requests = false;         // one stderr line per finished or rejected request
                                     // (ids, counts and timings; never prompt or output text)
  // How replies carry tool calls and reasoning (chat/tool_format.h): "auto" detects it from
  // the chat template, or a format's name ("none": replies are text).
  std::string tool_format = "auto";
  // --kv-events: the endpoints bound and the topic, reported in /v1/stats (hinge route finds a
  // replica's events there); empty without events.
  std::string kv_events_endpoint, kv_events_replay, kv_events_topic;
  bool metrics_compat_vllm = false;  // --metrics-compat vllm (server/metrics_compat.h)
};

class ApiServer {
 public:
  // chat_template: empty for the plain fallback. The tokenizer and engine must outlive this.
  static StatusOr<std::unique_ptr<ApiServer>> create(const ApiServerConfig& config,
                                                     const Tokenizer& tokenizer,
                                                     const std::string& chat_template,
                                                     EngineThread& engine);
  ~ApiServer();

  // kApi: the main listener (keys checked per route). kAdmin: hinge serve's --admin-port
  // listener: only /health, /metrics, /v1/stats, / and /admin/*, without keys.
  enum class Listener : uint8_t { kApi, kAdmin };
  void handle(HttpRequest request, ExchangePtr exchange, Listener listener = Listener::kApi);
  // Who sent a request (after the access check of its route).
  struct Caller {
    std::shared_ptr<const TenantSnapshot> tenants;  // the snapshot it was checked against
    std::optional<size_t> tenant;                    // index into tenants->config.tenants
  };
  // The prefix-cache scope of a request of `caller` with this prompt and these salts.
  kv::CacheScope cache_scope(const Caller& caller, std::span<const int32_t> prompt,
                             const std::optional<std::string>& cache_salt,
                             const std::optional<std::string>& prompt_cache_key) const;
  // The caller's usage counters (tenants only), or null.
  std::shared_ptr<TenantUsage> usage_of(const Caller& caller) const;
  // The transport's counters for /metrics (connections, timeouts, slow clients); optional.
  void set_transport_stats(std::function<http::ServerStats()> fn) { transport_stats_ = std::move(fn); }
  // Answers and counts the status in the metrics (every response goes through these).
  void respond(const ExchangePtr& ex, HttpResponse r);
  void respond_error(const ExchangePtr& ex, const ApiError& e, HttpHeaders headers = {});
  // New generation requests get 503 from now on; /health reports it.
  void begin_shutdown();

  Metrics& metrics() { return metrics_; }
  EngineThread& engine() { return engine_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const ApiServerConfig& config() const { return config_; }
  const ChatTemplate* chat_template() const { return template_ ? &*template_ : nullptr; }
  ToolFormat tool_format() const { return tool_format_; }
  bool shutting_down() const { return shutting_down_.load(); }
  // `name` is the model id or one of its aliases.
  bool serves(const std::string& name) const;
  // The longest text one token stands for, in bytes (>= 1): a text of B bytes has at least
  // B / max_token_bytes() tokens.
  size_t max_token_bytes() const { return max_token_bytes_; }
  double uptime_s() const;

  // 400 when a text of `bytes` bytes cannot fit the context whatever it says (see
  // max_token_bytes); checked before tokenizing.
  std::optional<ApiError> check_prompt_bytes(size_t bytes, const char* param) const;
  // Renders messages (parsed request) into prompt token ids; errors are 400s. Under
  // --context-policy shift with a chat template, also where the turns start (chat_turns).
  struct ChatPrompt {
    std::vector<int32_t> tokens;
    ChatTurns turns;
    bool reasoning_open = false;  // the prompt ends inside the format's reasoning block
  };
  ApiResult<ChatPrompt> chat_prompt(const nlohmann::ordered_json& messages,
                                    const nlohmann::ordered_json& tools) const;

 private:
  ApiServer(const ApiServerConfig& config, const Tokenizer& tokenizer,
            std::optional<ChatTemplate> tmpl, ToolFormat tool_format, EngineThread& engine);
  // The route table (api_server.cpp): one entry, with its handler, per route.
  struct Route;
  static const Route* find_route(const std::string& path);
  void handle_tokenize(const HttpRequest& r, const ExchangePtr& ex);    // on a worker
  void handle_detokenize(const HttpRequest& r, const ExchangePtr& ex);  // on a worker
  // POST /v1/chat/completions/render, /v1/completions/render: the token ids a request's prompt
  // becomes, without generating (what llm-d's scheduler asks a renderer); api_render.cpp.
  void handle_render(Endpoint endpoint, const HttpRequest& r, const ExchangePtr& ex);  // on a worker
  void handle_models(const HttpRequest& r, const ExchangePtr& ex);
  void handle_health(const ExchangePtr& ex);
  void handle_metrics(const ExchangePtr& ex);
  void handle_dashboard(const ExchangePtr& ex);
  void handle_stats(const ExchangePtr& ex);
  void handle_usage(const Caller& caller, const ExchangePtr& ex);
  void handle_admin(const HttpRequest& r, const ExchangePtr& ex);  // on a worker
  void handle_reset_prefix_cache(const ExchangePtr& ex);  // on a worker
  nlohmann::json tenants_json() const;
  std::string tenant_metrics() const;  // Prometheus lines labelled by tenant id (tenants only)
  void ticker();

  ApiServerConfig config_;
  const Tokenizer& tok_;
  std::optional<ChatTemplate> template_;
  ToolFormat tool_format_ = ToolFormat::kNone;
  EngineThread& engine_;
  Metrics metrics_;
  size_t max_token_bytes_ = 1;
  std::function<http::ServerStats()> transport_stats_;
  std::atomic<bool> shutting_down_{false};
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const int64_t created_unix_;
  std::atomic<bool> stop_ticker_{false};
  std::thread ticker_;
  std::unique_ptr<RequestWorkers> workers_;  // last: joined first, while the rest is alive
};

// The dashboard page (self-contained HTML + JS polling /v1/stats).
const std::string& dashboard_html();

}  // namespace hinge::server

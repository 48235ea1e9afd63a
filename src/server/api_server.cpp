#include "server/api_server.h"

#include "chat/tool_call_syntax.h"
#include "chat/tool_history.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <sodium.h>

#include "server/generation_job.h"
#include "server/metrics_compat.h"
#include "server/metrics_tier.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "chat/chat_prompt.h"

namespace hinge::server {

namespace {

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

enum class Access : uint8_t {
  kOpen,    // anyone
  kApi,     // a tenant's key (with tenants), the --api-key (without), else open
  kTenant,  // a tenant's key; 404 without tenants
  kAdmin,   // an admin key (with tenants), else open
  kAdminOnly,  // an admin key; 404 without tenants
};

ApiError unauthorized() {
  ApiError e;
  e.http_status = 401;
  e.message = "missing or unknown API key: send `Authorization: Bearer <key>` with a key this "
              "server knows";
  e.code = "invalid_api_key";
  return e;
}

// The Host of a request names the machine by address or as localhost (not a DNS name an
// attacker's page could rebind to this address).
bool host_is_address(std::string_view host) {
  if (!host.empty() && host.front() == '[') return host.find(']') != std::string_view::npos;
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return true;
  if (host.empty()) return false;
  for (char c : host)
    if (!(c == '.' || (c >= '0' && c <= '9'))) return false;
  return true;
}

ApiError forbidden(const std::string& why) {
  ApiError e;
  e.http_status = 403;
  e.type = "permission_error";
  e.message = why;
  e.code = "forbidden";
  return e;
}

}  // namespace

StatusOr<std::unique_ptr<ApiServer>> ApiServer::create(const ApiServerConfig& config,
                                                       const Tokenizer& tokenizer,
                                                       const std::string& chat_template,
                                                       EngineThread& engine) {
  if (engine.detokenizes())
    return Status::Error("the server needs an engine with EngineConfig::detokenize = false (it "
                         "detokenizes and matches stop strings itself)");
  std::optional<ChatTemplate> tmpl;
  if (!chat_template.empty()) {
    auto t = ChatTemplate::parse(chat_template);
    if (!t.ok()) return t.status().with_context("the model's chat template");
    tmpl.emplace(std::move(t).value());
  }
  ToolFormat format = chat_template.empty() ? ToolFormat::kNone : detect_tool_format(chat_template);
  if (config.tool_format != "auto") {
    const auto f = tool_format_from_name(config.tool_format);
    if (!f)
      return Status::Errorf("--tool-format: unknown '{}'; expected auto, none, hermes, llama3_json, "
                            "mistral, functionary_v3_1, functionary_v3_2, command_r7b, "
                            "command_r_plus, firefunction_v2 or deepseek_r1", config.tool_format);
    format = *f;
  }
  return std::unique_ptr<ApiServer>(new ApiServer(config, tokenizer, std::move(tmpl), format, engine));
}

ApiServer::ApiServer(const ApiServerConfig& config, const Tokenizer& tokenizer,
                     std::optional<ChatTemplate> tmpl, ToolFormat tool_format, EngineThread& engine)
    : config_(config),
      tok_(tokenizer),
      template_(std::move(tmpl)),
      tool_format_(tool_format),
      engine_(engine),
      metrics_(config.model_name),
      created_unix_(static_cast<int64_t>(std::time(nullptr))) {
  // The longest decoded piece or token text (special tokens are parsed in chat prompts).
  const auto& spec = tok_.spec();
  for (int32_t id = 0; id < tok_.n_vocab(); ++id) {
    max_token_bytes_ = std::max(max_token_bytes_, tok_.token_to_piece(id).size());
    if (static_cast<size_t>(id) < spec.tokens.size())
      max_token_bytes_ = std::max(max_token_bytes_, spec.tokens[static_cast<size_t>(id)].size());
  }
  ticker_ = std::thread([this] { ticker(); });
  workers_ = std::make_unique<RequestWorkers>(config.worker_threads, config.max_queued_bodies);
}

bool ApiServer::serves(const std::string& name) const {
  if (name == config_.model_name) return true;
  return std::find(config_.model_aliases.begin(), config_.model_aliases.end(), name) !=
         config_.model_aliases.end();
}

ApiServer::~ApiServer() {
  stop_ticker_.store(true);
  if (ticker_.joinable()) ticker_.join();
}

double ApiServer::uptime_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void ApiServer::ticker() {
  auto next = std::chrono::steady_clock::now();
  const auto step = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config_.history_interval_s));
  while (!stop_ticker_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::chrono::steady_clock::now() < next + step) continue;
    next += step;
    metrics_.tick(uptime_s(), engine_.stats());
  }
}

void ApiServer::begin_shutdown() { shutting_down_.store(true); }

void ApiServer::respond(const ExchangePtr& ex, HttpResponse r) {
  metrics_.http_response(r.status);
  ex->respond(std::move(r));
}

void ApiServer::respond_error(const ExchangePtr& ex, const ApiError& e, HttpHeaders headers) {
  HttpResponse r = json_response(e.http_status, api_error_body(e));
  r.headers = std::move(headers);
  respond(ex, std::move(r));
}

std::optional<ApiError> ApiServer::check_prompt_bytes(size_t bytes, const char* param) const {
  const size_t at_least = bytes / max_token_bytes_;
  const auto ctx = static_cast<size_t>(engine_.max_model_len());
  if (at_least < ctx) return std::nullopt;
  return ApiError::invalid_request(
      param, fmt::format("This model's maximum context length is {} tokens; the prompt has at "
                         "least {} tokens ({} bytes)", ctx, at_least, bytes));
}

ApiResult<ApiServer::ChatPrompt> ApiServer::chat_prompt(const nlohmann::ordered_json& messages,
                                                       const nlohmann::ordered_json& tools) const {
  if (!messages.is_array() || messages.empty())
    return ApiError::invalid_request("messages", "messages must be a non-empty array");
  std::string text;
  if (template_) {
    const nlohmann::ordered_json shaped = shape_tool_history(messages, tool_format_);
    const nlohmann::ordered_json& messages = shaped;  // the template's shape from here on
    auto r = render_chat(*template_, tok_, messages, tools, /*add_generation_prompt=*/true);
    if (!r.ok())
      return ApiError::invalid_request(
          "messages", "the chat template could not render these messages: " + r.status().message());
    text = std::move(r).value();
    if (auto e = check_prompt_bytes(text.size(), "messages")) return *e;
    ChatPrompt p{.tokens = encode_rendered_chat(tok_, text), .turns = {}};
    // A template that opens the reasoning block itself ("<think>\n" at the end of DeepSeek-R1
    // distills' prompts): the reply starts inside it.
    const std::string_view open = tool_syntax::markers(tool_format_).think_open;
    if (!open.empty()) {
      std::string_view t = text;
      while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
      p.reasoning_open = t.size() >= open.size() && t.substr(t.size() - open.size()) == open;
    }
    if (engine_.shifts_context())
      p.turns = chat_turns(*template_, tok_, messages, tools, text, p.tokens);
    return p;
  }
  // Plain fallback: contents joined by newlines, no roles.
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& c = messages[i].contains("content") ? messages[i]["content"] : nlohmann::ordered_json();
    if (c.is_null()) continue;
    if (!c.is_string())
      return ApiError::invalid_request(fmt::format("messages[{}].content", i),
                                       "content must be a string");
    if (!text.empty()) text += '\n';
    text += c.get_ref<const std::string&>();
  }
  if (auto e = check_prompt_bytes(text.size(), "messages")) return *e;
  return ChatPrompt{.tokens = tok_.encode(text, /*add_special=*/true, /*parse_special=*/false),
                    .turns = {}};
}

void ApiServer::handle_tokenize(const HttpRequest& r, const ExchangePtr& ex) {
  auto req = parse_tokenize_request(r.body);
  if (!req.ok()) return respond_error(ex, req.error());
  // No context check here: /tokenize counts any text the body limit lets through.
  const auto ids = tok_.encode(req->text, req->add_special, /*parse_special=*/true);
  OJson j = tokenize_response(ids);
  j["count"] = ids.size();
  j["max_model_len"] = engine_.max_model_len();
  respond(ex, json_response(200, to_body(j)));
}

void ApiServer::handle_detokenize(const HttpRequest& r, const ExchangePtr& ex) {
  auto req = parse_detokenize_request(r.body);
  if (!req.ok()) return respond_error(ex, req.error());
  for (size_t i = 0; i < req->tokens.size(); ++i)
    if (req->tokens[i] >= config_.n_vocab)
      return respond_error(ex, ApiError::invalid_request(
                                   fmt::format("tokens[{}]", i),
                                   fmt::format("token id {} is out of range [0, {})",
                                               req->tokens[i], config_.n_vocab)));
  std::string text;
  for (int32_t id : req->tokens) text += tok_.token_to_piece(id);
  respond(ex, json_response(200, to_body(detokenize_response(text))));
}

void ApiServer::handle_models(const HttpRequest& r, const ExchangePtr& ex) {
  auto card = [&](const std::string& id) {
    OJson model = OJson::object();
    model["id"] = id;
    model["object"] = "model";
    model["created"] = created_unix_;
    model["owned_by"] = "hinge";
    model["root"] = config_.model_name;
    model["max_model_len"] = engine_.max_model_len();
    return model;
  };
  if (r.path == "/v1/models") {
    OJson j = OJson::object();
    j["object"] = "list";
    j["data"] = OJson::array({card(config_.model_name)});
    for (const std::string& a : config_.model_aliases)
      if (a != config_.model_name) j["data"].push_back(card(a));
    return respond(ex, json_response(200, to_body(j)));
  }
  const std::string id = r.path.substr(std::string("/v1/models/").size());
  if (!serves(id))
    return respond_error(ex, ApiError::not_found(
                                 fmt::format("The model `{}` does not exist", id.substr(0, 200)),
                                 "model"));
  respond(ex, json_response(200, to_body(card(id))));
}

void ApiServer::handle_stats(const ExchangePtr& ex) {
  const EngineThreadStats s = engine_.stats();
  const EngineStats& e = s.engine;
  nlohmann::json j;
  j["model"] = config_.model_name;
  j["uptime_s"] = uptime_s();
  j["draining"] = shutting_down_.load();
  const int32_t qi = s.admission ? s.admission->queued_interactive : 0;
  const int32_t qb = s.admission ? s.admission->queued_batch : 0;
  j["requests"] = {{"running", e.running}, {"waiting_engine", e.waiting},
                   {"queued_interactive", qi}, {"queued_batch", qb}, {"active", s.active}};
  j["engine"] = {{"steps", e.steps}, {"preemptions", e.preemptions},
                 {"prompt_tokens_computed", e.prompt_tokens_computed},
                 {"output_tokens", e.output_tokens}};
  j["speculative"] = {{"verifications", e.spec_verifications},
                      {"draft_tokens", e.spec_draft_tokens},
                      {"accepted_tokens", e.spec_accepted_tokens},
                      {"acceptance", e.spec_draft_tokens > 0
                                         ? static_cast<double>(e.spec_accepted_tokens) /
                                               static_cast<double>(e.spec_draft_tokens)
                                         : 0.0},
                      {"tokens_per_verification",
                       e.spec_verifications > 0
                           ? 1.0 + static_cast<double>(e.spec_accepted_tokens) /
                                       static_cast<double>(e.spec_verifications)
                           : 0.0},
                      {"draft_model_tokens", e.spec_draft_model_tokens},
                      {"draft_model_seconds", e.spec_draft_model_seconds},
                      {"draft_model_kv_bytes", e.spec_draft_model_kv_bytes}};
  j["kv"] = {{"blocks_total", e.kv_blocks_total},
             {"blocks_used", e.kv_blocks_used},
             {"blocks_free", e.kv_blocks_total - e.kv_blocks_used - e.kv_blocks_withheld},
             {"blocks_withheld", e.kv_blocks_withheld},
             {"blocks_limit", e.kv_blocks_limit},
             {"bytes_released", e.kv_bytes_released},
             {"blocks_cached", e.kv.pool.num_cached_free_blocks},
             {"blocks_shared", e.kv.pool.num_shared_blocks},
             {"cached_hashes", e.kv.pool.num_cached_hashes},
             {"blocks_reserved", s.admission ? s.admission->reserved_blocks : 0},
             {"blocks_peak", e.kv_blocks_peak},
             {"block_size", engine_.block_size()},
             {"bytes_total", e.kv_bytes_total},
             {"evictions", e.kv.pool.num_evictions},
             {"cow_copies", e.kv.num_cow_copies},
             {"map", s.kv_block_map}};
  if (!config_.kv_events_endpoint.empty())
    j["kv_events"] = {{"endpoint", config_.kv_events_endpoint},
                      {"replay", config_.kv_events_replay},
                      {"topic", config_.kv_events_topic}};
  {
    const PressureStats& p = s.pressure;
    j["memory_pressure"] = {
        {"level", pressure::pressure_level_name(p.level)},
        {"thermal", pressure::pressure_level_name(p.thermal)},
        {"reasons", p.reasons},
        {"transitions", {{"normal", p.transitions[0]}, {"elevated", p.transitions[1]},
                         {"critical", p.transitions[2]}}},
        {"rejected", p.rejected},
        {"capped", p.capped},
        {"max_num_seqs", e.max_num_seqs_now},
        {"max_batched_tokens", e.max_batched_tokens_now},
        {"reclaimed_bytes", e.kv_bytes_released}};
  }
  j["memory_budget"] = {{"budget_bytes", e.memory_budget_bytes},
                        {"rss_bytes", e.rss_bytes},
                        {"rss_peak_bytes", e.rss_peak_bytes},
                        {"kv_resident_bytes", e.kv_resident_bytes},
                        {"kv_limit_blocks", e.memory_budget_kv_limit_blocks},
                        {"limited", e.memory_budget_limited},
                        {"kv_trimmed_bytes", e.kv_trimmed_bytes},
                        {"kv_low_watermark_bytes", e.kv_low_watermark_bytes}};
  const double q = static_cast<double>(e.kv.num_prefix_query_tokens);
  j["prefix_cache"] = {{"query_tokens", e.kv.num_prefix_query_tokens},
                       {"hit_tokens", e.kv.num_prefix_hit_tokens},
                       {"hit_rate", q > 0 ? static_cast<double>(e.kv.num_prefix_hit_tokens) / q : 0.0}};
  j["prefix_cache"]["public_hit_tokens"] = e.kv.num_prefix_public_hit_tokens;
  j["prefix_cache"]["quota_evictions"] = e.kv.pool.num_quota_evictions;
  j["prefix_cache"]["expired"] = e.kv.pool.num_expired;
  if (config_.tenants) j["tenants"] = tenants_json();  // admins only (handle's access check)
  j["counters"] = metrics_.counters_json();
  j["history"] = metrics_.history_json();
  j["history_interval_s"] = config_.history_interval_s;
  HttpResponse r = json_response(200, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  r.headers.emplace_back("Cache-Control", "no-store");
  respond(ex, std::move(r));
}

void ApiServer::handle_reset_prefix_cache(const ExchangePtr& ex) {
  const int32_t n = engine_.call([](Engine& e) { return e.reset_prefix_cache(); });
  std::fprintf(stderr, "hinge: prefix cache reset: %d entries dropped\n", n);
  const nlohmann::json j = {{"reset", n >= 0}, {"dropped_blocks", std::max(n, 0)}};
  respond(ex, json_response(200, j.dump()));
}

// One entry per route: its path (exact, or a prefix of a longer path), its method (GET routes
// also take HEAD), who may call it, and its handler. POST handlers run on a request worker (the
// body's work: parsing, templates, tokenization) from the queue `kind` names; GET handlers run
// on the connection's thread.
struct ApiServer::Route {
  const char* path;
  const char* method;
  bool prefix;
  Access access;
  RequestWorkers::Kind kind;
  void (*handler)(ApiServer& api, HttpRequest& r, const ExchangePtr& ex, Caller& caller);
};

const ApiServer::Route* ApiServer::find_route(const std::string& path) {
  using K = RequestWorkers::Kind;
  using R = HttpRequest;
  using E = ExchangePtr;
  static const Route kRoutes[] = {
      {"/v1/chat/completions", "POST", false, Access::kApi, K::kGeneration,
       [](ApiServer& a, R& r, const E& ex, Caller& c) {
         handle_generation(a, Endpoint::kChatCompletions, std::move(r), ex, std::move(c));
       }},
      {"/v1/completions", "POST", false, Access::kApi, K::kGeneration,
       [](ApiServer& a, R& r, const E& ex, Caller& c) {
         handle_generation(a, Endpoint::kCompletions, std::move(r), ex, std::move(c));
       }},
      {"/v1/chat/completions/render", "POST", false, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_render(Endpoint::kChatCompletions, r, ex); }},
      {"/v1/completions/render", "POST", false, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_render(Endpoint::kCompletions, r, ex); }},
      {"/tokenize", "POST", false, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_tokenize(r, ex); }},
      {"/detokenize", "POST", false, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_detokenize(r, ex); }},
      {"/v1/models/", "GET", true, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_models(r, ex); }},
      {"/v1/models", "GET", false, Access::kApi, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_models(r, ex); }},
      {"/v1/usage", "GET", false, Access::kTenant, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller& c) { a.handle_usage(c, ex); }},
      {"/health", "GET", false, Access::kOpen, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller&) { a.handle_health(ex); }},
      {"/metrics", "GET", false, Access::kAdmin, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller&) { a.handle_metrics(ex); }},
      {"/v1/stats", "GET", false, Access::kAdmin, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller&) { a.handle_stats(ex); }},
      {"/", "GET", false, Access::kAdmin, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller&) { a.handle_dashboard(ex); }},
      {"/admin/reload", "POST", false, Access::kAdminOnly, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_admin(r, ex); }},
      {"/admin/tenants/", "POST", true, Access::kAdminOnly, K::kBulk,
       [](ApiServer& a, R& r, const E& ex, Caller&) { a.handle_admin(r, ex); }},
      // vLLM's path: routers and tests clear the prefix cache (events: AllBlocksCleared).
      {"/reset_prefix_cache", "POST", false, Access::kAdmin, K::kBulk,
       [](ApiServer& a, R&, const E& ex, Caller&) { a.handle_reset_prefix_cache(ex); }},
  };
  for (const Route& rt : kRoutes) {
    if (rt.prefix ? path.rfind(rt.path, 0) == 0 && path.size() > std::strlen(rt.path)
                  : path == rt.path)
      return &rt;
  }
  return nullptr;
}

void ApiServer::handle(HttpRequest r, ExchangePtr ex, Listener listener) {
  const Route* route = find_route(r.path);
  if (r.method == "OPTIONS" && r.path == "*") {
    HttpResponse resp;
    resp.status = 204;
    resp.headers.emplace_back("Allow", "GET, HEAD, POST, OPTIONS");
    return respond(ex, std::move(resp));
  }
  if (!route)
    return respond_error(ex, ApiError::not_found(fmt::format("no route {} {}", r.method,
                                                             r.path.substr(0, 200))));
  const bool admin_listener = listener == Listener::kAdmin;
  // The key-less admin listener answers its operator's tools, never a web page: no DNS names
  // in Host (rebinding), no cross-site POSTs (a browser sends Origin with them).
  if (admin_listener && !host_is_address(r.header("host")))
    return respond_error(ex, forbidden("the admin listener answers requests to an address "
                                       "(Host: 127.0.0.1:PORT or localhost:PORT) only"));
  if (admin_listener && r.method == "POST" && !r.header("origin").empty())
    return respond_error(ex, forbidden("the admin listener does not take POSTs from web pages "
                                       "(an Origin header); use curl or a script"));
  if (admin_listener && (route->access == Access::kApi || route->access == Access::kTenant))
    return respond_error(ex, ApiError::not_found(fmt::format(
                                 "the admin listener serves /health, /metrics, /v1/stats, / and "
                                 "/admin/*; {} is on the API listener", r.path.substr(0, 200))));
  const bool get = std::strcmp(route->method, "GET") == 0;
  const std::string allow = get ? "GET, HEAD, OPTIONS" : "POST, OPTIONS";
  if (r.method == "OPTIONS") {
    HttpResponse resp;
    resp.status = 204;
    resp.headers.emplace_back("Allow", allow);
    return respond(ex, std::move(resp));
  }
  if (r.method != route->method && !(get && r.method == "HEAD")) {
    ApiError e;
    e.http_status = 405;
    e.message = fmt::format("{} {} is not allowed; use {}", r.method.substr(0, 16),
                            r.path.substr(0, 200), route->method);
    return respond_error(ex, e, {{"Allow", allow}});
  }
  // Access: who the key names, against one snapshot of the tenants.
  Caller caller;
  {
    const Access a = route->access;
    const std::string authorization = r.header("authorization");  // key views into it
    const std::string_view key = bearer_key(authorization);
    if (config_.tenants) {
      caller.tenants = config_.tenants->snapshot();
      // The admin listener (--admin-port, loopback by default) is the operator's own: its
      // routes need no key there.
      if (a != Access::kOpen && !admin_listener) {
        const Principal who = authenticate(caller.tenants->config, key);
        const bool admin_route = a == Access::kAdmin || a == Access::kAdminOnly;
        if (who.kind == Principal::Kind::kNone)
          return respond_error(ex, unauthorized(), {{"WWW-Authenticate", "Bearer"}});
        if (admin_route && who.kind != Principal::Kind::kAdmin)
          return respond_error(ex, forbidden("this route needs an admin key; a tenant's key may "
                                             "call /v1/*, /tokenize and /detokenize"));
        if (!admin_route && who.kind != Principal::Kind::kTenant)
          return respond_error(ex, forbidden("an admin key manages the server; send a tenant's "
                                             "key to call the API"));
        if (who.kind == Principal::Kind::kTenant) caller.tenant = who.tenant_index;
      }
    } else {
      if (a == Access::kTenant || a == Access::kAdminOnly)
        return respond_error(ex, ApiError::not_found(fmt::format(
                                     "{} needs tenants (hinge serve --tenants FILE)",
                                     r.path.substr(0, 200))));
      // A POST to an admin route changes the server: the --api-key guards it as well.
      const bool keyed = a == Access::kApi || (a == Access::kAdmin && r.method == "POST");
      if (keyed && config_.api_key_digest) {
        const KeyDigest d = key_digest(key);
        if (key.empty() || sodium_memcmp(d.data(), config_.api_key_digest->data(), d.size()) != 0)
          return respond_error(ex, unauthorized(), {{"WWW-Authenticate", "Bearer"}});
      }
    }
  }
  if (!get) {
    // The body's work (parsing, templates, tokenization) goes to a worker.
    const bool generation = route->kind == RequestWorkers::Kind::kGeneration;
    const size_t bytes = r.body.size();
    const bool queued = workers_->submit(
        [this, route, r = std::move(r), ex, caller = std::move(caller)]() mutable {
          // Handlers answer errors themselves; what still escapes (an allocation failure)
          // must not leave the client waiting.
          try {
            route->handler(*this, r, ex, caller);
          } catch (const std::exception& e) {
            respond_error(ex, ApiError::server_error(std::string("internal error: ") + e.what()));
          }
        },
        route->kind, bytes);
    if (!queued) {
      if (generation) {
        metrics_.request_received();
        metrics_.request_rejected("server_busy");
      }
      respond_error(ex, ApiError::unavailable("overloaded", "the server is busy preparing other "
                                              "requests; retry shortly"),
                    {{"Retry-After", "1"}});
    }
    return;
  }
  route->handler(*this, r, ex, caller);
}

void ApiServer::handle_health(const ExchangePtr& ex) {
  if (shutting_down_.load()) return respond(ex, json_response(503, R"({"status":"shutting_down"})"));
  respond(ex, json_response(200, R"({"status":"ok"})"));
}

void ApiServer::handle_metrics(const ExchangePtr& ex) {
  HttpResponse resp;
  resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
  const EngineThreadStats stats = engine_.stats();
  resp.body = metrics_.render_prometheus(stats);
  if (transport_stats_) resp.body += render_transport_metrics(transport_stats_(), metrics_.labels());
  resp.body += render_tier_metrics(config_.kv_tiers, stats.engine, metrics_.labels());
  if (config_.metrics_compat_vllm) resp.body += vllm_compat_metrics(resp.body);
  resp.body += tenant_metrics();
  respond(ex, std::move(resp));
}

void ApiServer::handle_dashboard(const ExchangePtr& ex) {
  HttpResponse page;
  page.content_type = "text/html; charset=utf-8";
  page.body = dashboard_html();
  respond(ex, std::move(page));
}

}  // namespace hinge::server

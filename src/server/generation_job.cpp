#include "server/generation_job.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "chat/tool_grammar.h"
#include "engine/output_processor.h"
#include "sched/kv_demand.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace hinge::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's legacy completions default

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s;
  while (s.size() < n) s += fmt::format("{:016x}", rng());
  s.resize(n);
  return s;
}

uint64_t random_seed() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

std::string user_key(const HttpRequest& r, const OpenAiRequest& req) {
  const std::string auth = r.header("authorization");
  if (auth.size() > 7 && auth.compare(0, 7, "Bearer ") == 0) return "key:" + auth.substr(7);
  if (!req.user.empty()) return "user:" + req.user;
  return {};
}

// Output state of one choice, on the connection's strand.
struct ChoiceState {
  std::optional<OutputProcessor> output;  // text and stop strings, as the engine's
  bool started = false;   // a chunk was sent (chat: the role chunk)
  bool finished = false;  // from the client's view (a stop string ends it before the engine)
  bool stopped = false;   // a stop string matched: later tokens are dropped
  int32_t completion_tokens = 0;
  int64_t text_bytes = 0;  // text sent so far (completions logprobs text_offset)
  std::vector<LogprobEntry> logprobs;  // non-streaming: all of them
  bool echoed = false;             // echo: the prompt text went out (first piece)
  double cumulative_logprob = 0;  // of the tokens returned (best_of ranks by it)
  // Chat replies in a tool / reasoning format: the parser, and the calls sent so far.
  std::optional<ReplyParser> reply;
  int32_t calls = 0;
};

// Per-request state. The engine thread only posts each delta to the connection's strand
// (on_delta); detokenization, stop strings, logprobs text and the SSE/JSON building run there
// (process), one delta at a time in order. on_close runs on the strand too.
struct Job {
  ApiServer* api = nullptr;
  std::shared_ptr<TenantUsage> usage;  // the tenant's counters (tenants only)
  ExchangePtr ex;
  Endpoint endpoint = Endpoint::kChatCompletions;
  bool stream = false;
  ResponseHeader header;
  int32_t n = 1;         // samples generated (best_of)
  int32_t n_return = 1;  // choices returned: the n_return best of the n (non-streaming)
  int32_t prompt_tokens = 0;
  int32_t last_prompt_token = -1;
  int32_t top_logprobs = -1;   // -1: no logprobs from the engine
  bool emit_logprobs = false;  // the client asked (best_of requests them to rank samples)
  bool echo = false;           // completions: each choice starts with echo_text
  bool score_only = false;     // echo with max_tokens 0: the one token sampled is dropped
  std::string echo_text;
  std::vector<int32_t> echo_ids;  // echo with logprobs: the prompt, for its tokens' pieces
  std::vector<std::string> stop;
  std::optional<ReplyParserOptions> reply;  // chat replies parsed for tool calls / reasoning
  bool parallel_tool_calls = true;          // false: the first call of a reply only
  Clock::time_point arrival;
  SubmitTicket ticket;

  // The connection's strand only.
  std::vector<ChoiceOutput> choices;
  std::vector<ChoiceState> state;
  std::vector<RequestUsage> usages;
  int32_t num_finished = 0;
  bool any_token = false;
  bool done = false;
  Clock::time_point last_token;

  void init_choices() {
    choices.resize(static_cast<size_t>(n));
    usages.resize(static_cast<size_t>(n));
    state.resize(static_cast<size_t>(n));
    uint64_t k = 0;
    for (ChoiceState& c : state) {
      c.output.emplace(api->tokenizer(), stop, last_prompt_token);
      if (reply) {
        ReplyParserOptions o = *reply;
        o.id_seed += k++;  // each choice its own call ids
        c.reply.emplace(o);
      }
    }
  }
  void process(const RequestDelta& d);
  void echo_logprobs(const std::vector<PositionLogprobs>& prompt_lps,
                     std::vector<LogprobEntry>* out) const;
  void finish();
  void fail();
};

// The prompt's tokens as logprob entries (OpenAI's echo format): pieces as they appear in the
// text (piece_after), the first without a logprob; prompt_lps[i] is prompt token i + 1's.
void Job::echo_logprobs(const std::vector<PositionLogprobs>& prompt_lps,
                        std::vector<LogprobEntry>* out) const {
  const Tokenizer& tok = api->tokenizer();
  for (size_t i = 0; i < echo_ids.size(); ++i) {
    LogprobEntry e;
    e.token = tok.piece_after(i == 0 ? -1 : echo_ids[i - 1], echo_ids[i]);
    if (i == 0 || i - 1 >= prompt_lps.size()) {
      e.no_logprob = true;
    } else {
      const PositionLogprobs& p = prompt_lps[i - 1];
      e.logprob = p.sampled.logprob;
      for (const TokenLogprob& t : p.top) e.top.emplace_back(tok.token_to_piece(t.token), t.logprob);
    }
    out->push_back(std::move(e));
  }
}

void Job::process(const RequestDelta& d) {
  const auto i = static_cast<size_t>(d.index);
  if (done || i >= state.size() || state[i].finished) return;
  if (d.finish_reason == FinishReason::kError) return fail();
  ChoiceState& c = state[i];
  const Tokenizer& tok = api->tokenizer();
  const auto now = Clock::now();
  Metrics& m = api->metrics();
  ChoicePiece piece;
  piece.index = d.index;
  std::vector<LogprobEntry> lps;
  if (echo && !c.echoed) {  // not through the stop matcher: stop strings end completions only
    c.echoed = true;
    piece.text = echo_text;
    if (emit_logprobs) echo_logprobs(d.prompt_logprobs, &lps);
  }
  int64_t taken = 0;
  const size_t num_tokens = score_only ? 0 : d.token_ids.size();
  for (size_t k = 0; k < num_tokens && !c.stopped; ++k) {
    const int32_t id = d.token_ids[k];
    piece.text += c.output->push(id);
    ++c.completion_tokens;
    ++taken;
    if (top_logprobs >= 0 && k < d.logprobs.size())
      c.cumulative_logprob += d.logprobs[k].sampled.logprob;
    if (emit_logprobs && k < d.logprobs.size()) {
      LogprobEntry e;
      e.token = tok.token_to_piece(id);
      e.logprob = d.logprobs[k].sampled.logprob;
      for (const TokenLogprob& t : d.logprobs[k].top)
        e.top.emplace_back(tok.token_to_piece(t.token), t.logprob);
      lps.push_back(std::move(e));
    }
    if (c.output->stopped()) {
      c.stopped = true;
      api->engine().cancel_sample(ticket, d.index);
    }
  }
  if (taken > 0) {
    if (!any_token) {
      m.first_token(std::chrono::duration<double>(now - arrival).count());
      any_token = true;
      if (taken > 1) m.inter_token(0, taken - 1);
    } else {
      m.inter_token(std::chrono::duration<double>(now - last_token).count(), taken);
    }
    last_token = now;
    m.tokens_generated(taken);
  }
  if ((d.finished() || c.stopped) && !c.finished) {
    piece.text += c.output->finish();  // nothing after a stop string
    c.finished = true;
    piece.finish_reason = c.stopped ? FinishReason::kStop : d.finish_reason;
    if (score_only && piece.finish_reason != FinishReason::kAborted)
      piece.finish_reason = FinishReason::kLength;  // OpenAI's answer to max_tokens 0
    choices[i].finish_reason = piece.finish_reason;
    choices[i].dropped_tokens = piece.dropped_tokens = d.usage.dropped_tokens;
  }
  usages[i] = d.usage;
  usages[i].completion_tokens = c.completion_tokens;
  if (c.reply) {
    // The reply's text becomes content, reasoning and tool calls (chat/reply_parser.h).
    piece.parsed = true;
    piece.calls_before = c.calls;
    c.reply->feed(piece.text, &piece.events);
    if (c.finished) c.reply->finish(&piece.events);
    if (!parallel_tool_calls) {  // the first call only
      std::erase_if(piece.events, [&, seen = c.calls](const ReplyEvent& e) mutable {
        return e.kind == ReplyEvent::Kind::kToolCall && seen++ > 0;
      });
    }
    for (const ReplyEvent& e : piece.events) c.calls += e.kind == ReplyEvent::Kind::kToolCall;
    piece.any_tool_call = c.calls > 0;
  }
  if (stream) {
    if (!lps.empty())
      piece.logprobs = endpoint == Endpoint::kChatCompletions
                           ? chat_logprobs_json(lps)
                           : completion_logprobs_json(lps, c.text_bytes);
    std::string out;
    append_piece_events(header, endpoint, piece, !c.started, &out);
    c.started = true;
    if (!out.empty()) ex->write(std::move(out));
  } else {
    if (piece.parsed) {
      for (ReplyEvent& e : piece.events) {
        if (e.kind == ReplyEvent::Kind::kContent) choices[i].text += e.text;
        else if (e.kind == ReplyEvent::Kind::kReasoning) choices[i].reasoning += e.text;
        else choices[i].tool_calls.push_back(std::move(e.call));
      }
    } else {
      choices[i].text += piece.text;
    }
    for (auto& e : lps) c.logprobs.push_back(std::move(e));
  }
  c.text_bytes += static_cast<int64_t>(piece.text.size());
  if (c.finished && ++num_finished == n) finish();
}

void Job::finish() {
  done = true;
  if (emit_logprobs && !stream)
    for (size_t i = 0; i < choices.size(); ++i)
      choices[i].logprobs = endpoint == Endpoint::kChatCompletions
                                ? chat_logprobs_json(state[i].logprobs)
                                : completion_logprobs_json(state[i].logprobs, 0);
  if (n_return < n) {  // best_of (never streamed): the n_return most likely samples
    std::vector<double> scores;
    for (const ChoiceState& c : state) scores.push_back(c.cumulative_logprob);
    std::vector<ChoiceOutput> best;
    for (size_t i : best_of_indices(scores, n_return)) best.push_back(std::move(choices[i]));
    choices = std::move(best);
  }
  const RequestUsage usage = total_usage(usages);  // every sample's tokens, best_of's too
  FinishReason last = FinishReason::kStop;
  for (const auto& c : choices) last = c.finish_reason;
  const double e2e = std::chrono::duration<double>(Clock::now() - arrival).count();
  api->metrics().request_finished(sched::finish_reason_name(last), e2e);
  if (TenantUsage* t = this->usage.get()) {  // `usage` here is the request's (a local)
    t->prompt_tokens.fetch_add(usage.prompt_tokens, std::memory_order_relaxed);
    t->cached_tokens.fetch_add(usage.cached_tokens, std::memory_order_relaxed);
    t->completion_tokens.fetch_add(usage.completion_tokens, std::memory_order_relaxed);
  }
  if (api->config().log_requests)
    std::fprintf(stderr,
                 "hinge: %s n=%d prompt=%d cached=%d completion=%d e2e=%.3fs finish=%s%s\n",
                 header.id.c_str(), n, usage.prompt_tokens, usage.cached_tokens,
                 usage.completion_tokens, e2e, sched::finish_reason_name(last),
                 stream ? " stream" : "");
  if (stream) {
    std::string out;
    if (header.include_usage) out += sse_event(usage_chunk(header, endpoint, usage));
    out += sse_done();
    ex->write(std::move(out));
    ex->end_stream();
    return;
  }
  HttpResponse r;
  r.body = to_body(endpoint == Endpoint::kChatCompletions
                       ? chat_completion_response(header, choices, usage)
                       : completion_response(header, choices, usage));
  api->respond(ex, std::move(r));
}

// The engine's step failed for one of the samples (engine.h, Engine::step): the request as a
// whole fails, whatever its other samples did. Non-streaming: a 500; streaming (the 200 is
// sent): a last event with the error object, then [DONE], as vLLM does. The engine's own
// message goes to the log only (it names internals); the client's never quotes the prompt.
void Job::fail() {
  done = true;
  api->engine().cancel(ticket);  // samples still running, if any
  const double e2e = std::chrono::duration<double>(Clock::now() - arrival).count();
  api->metrics().request_finished(sched::finish_reason_name(FinishReason::kError), e2e);
  if (api->config().log_requests)
    std::fprintf(stderr, "hinge: %s n=%d prompt=%d e2e=%.3fs finish=error%s\n", header.id.c_str(),
                 n, prompt_tokens, e2e, stream ? " stream" : "");
  ApiError e = ApiError::server_error(
      "the engine failed while computing this request; retry it (the server keeps serving)");
  e.code = "engine_error";
  if (stream) {
    ex->write(sse_event(api_error_json(e)) + sse_done());
    ex->end_stream();
    return;
  }
  api->respond_error(ex, e);
}

ApiError rejection_error(const SubmitResult& r, HttpHeaders* headers) {
  using K = SubmitResult::Kind;
  ApiError e;
  e.message = r.message;
  switch (r.kind) {
    case K::kInvalid:
      e = ApiError::invalid_request("", r.message);
      break;
    case K::kTooLarge:
      e = ApiError::invalid_request("max_tokens", r.message);
      e.code = "request_too_large";
      break;
    case K::kUserLimit:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "too_many_concurrent_requests";
      break;
    case K::kQueueFull:
    case K::kTimedOut:
    case K::kShuttingDown:
    case K::kPressure:
    case K::kCancelled:
      e = ApiError::unavailable(r.kind == K::kShuttingDown ? "shutting_down"
                                : r.kind == K::kPressure   ? "memory_pressure"
                                                           : "overloaded",
                                r.message);
      break;
    case K::kAccepted:
      break;
  }
  if (r.retry_after_s > 0) headers->emplace_back("Retry-After", std::to_string(r.retry_after_s));
  return e;
}

}  // namespace

void handle_generation(ApiServer& api, Endpoint endpoint, HttpRequest request,
                       ExchangePtr exchange, ApiServer::Caller caller) {
  Metrics& m = api.metrics();
  m.request_received();
  const auto arrival = Clock::now();
  const std::shared_ptr<TenantUsage> usage = api.usage_of(caller);
  auto fail = [&](const ApiError& e, const std::string& reason = "invalid") {
    m.request_rejected(reason);
    if (usage) usage->rejected.fetch_add(1, std::memory_order_relaxed);
    api.respond_error(exchange, e);
  };
  if (api.shutting_down()) {
    m.request_rejected("shutting_down");
    api.respond_error(exchange, ApiError::unavailable("shutting_down", "the server is shutting down"),
                      {{"Retry-After", "5"}});
    return;
  }
  auto parsed = endpoint == Endpoint::kChatCompletions ? parse_chat_request(request.body)
                                                       : parse_completion_request(request.body);
  if (!parsed.ok()) return fail(parsed.error());
  OpenAiRequest& req = *parsed;
  const std::string& served = api.config().model_name;
  if (!req.model.empty() && !api.serves(req.model))
    return fail(ApiError::not_found(
        fmt::format("The model `{}` does not exist; this server serves `{}`", req.model, served),
        "model"));
  const bool has_tools = req.tools.is_array() && !req.tools.empty();
  if (has_tools && endpoint == Endpoint::kChatCompletions && !api.chat_template())
    return fail(ApiError::invalid_request("tools", "this model has no chat template for tools"));
  using TC = OpenAiRequest::ToolChoice;
  if (has_tools && req.tool_choice_mode != TC::kNone && api.tool_format() == ToolFormat::kNone)
    return fail(ApiError::invalid_request(
        "tools", "this model's chat template has no tool-call syntax hinge knows; start the "
                 "server with --tool-format NAME (docs/tool-calls.md) or send tool_choice 'none'"));
  for (const LogitBias& b : req.sampling.logit_bias)
    if (b.token >= api.config().n_vocab)
      return fail(ApiError::invalid_request(
          fmt::format("logit_bias.{}", b.token),
          fmt::format("token id {} is out of range [0, {})", b.token, api.config().n_vocab)));

  // The prompt.
  std::vector<int32_t> prompt;
  ChatTurns turns;  // chat under --context-policy shift: the system prompt and turn starts
  bool reasoning_open = false;
  const Tokenizer& tok = api.tokenizer();
  if (endpoint == Endpoint::kChatCompletions) {
    auto p = api.chat_prompt(req.messages, req.tools);
    if (!p.ok()) return fail(p.error());
    prompt = std::move(p->tokens);
    turns = std::move(p->turns);
    reasoning_open = p->reasoning_open;
  } else if (req.prompt_is_tokens) {
    prompt = std::move(req.prompt_token_ids);
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] >= api.config().n_vocab)
        return fail(ApiError::invalid_request(
            fmt::format("prompt[{}]", i),
            fmt::format("token id {} is out of range [0, {})", prompt[i], api.config().n_vocab)));
  } else {
    if (auto e = api.check_prompt_bytes(req.prompt_text.size(), "prompt")) return fail(*e);
    prompt = tok.encode(req.prompt_text, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) {
    if (tok.bos() < 0) return fail(ApiError::invalid_request("prompt", "the prompt is empty"));
    prompt.push_back(tok.bos());
  }
  EngineThread& et = api.engine();
  const int64_t ctx = et.max_model_len();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= ctx)
    return fail(ApiError::invalid_request(
        endpoint == Endpoint::kChatCompletions ? "messages" : "prompt",
        fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens",
                    ctx, n_prompt)));
  int64_t max_tokens = 0;
  if (req.max_tokens) {
    max_tokens = *req.max_tokens;
    // (--context-policy shift: old tokens make room, the output may run past the context.)
    if (n_prompt + max_tokens > ctx && !et.shifts_context())
      return fail(ApiError::invalid_request(
          "max_tokens",
          fmt::format("This model's maximum context length is {} tokens. However, you requested "
                      "{} tokens ({} in the prompt, {} for the completion); lower max_tokens",
                      ctx, n_prompt + max_tokens, n_prompt, max_tokens)));
  } else if (endpoint == Endpoint::kCompletions) {
    max_tokens = std::min<int64_t>(kDefaultCompletionMaxTokens, ctx - n_prompt);
  } else {
    // The rest of the context, capped to what admission lets one request reserve.
    max_tokens = ctx - n_prompt;
    if (et.max_request_blocks() < INT32_MAX)
      max_tokens = std::max<int64_t>(
          1, sched::max_new_tokens_within(et.max_request_blocks(), n_prompt, req.best_of,
                                          et.kv_demand(), max_tokens));
  }

  GenerateRequest g;
  g.prompt_token_ids = std::move(prompt);
  g.keep_tokens = turns.keep_tokens;
  g.turn_starts = std::move(turns.turn_starts);
  g.sampling = req.sampling;
  g.sampling.seed = req.seed ? *req.seed : random_seed();
  g.sampling.grammar = req.structured.grammar;
  // tool_choice "required" / a named function: the reply is constrained to calls.
  if (has_tools && (req.tool_choice_mode == TC::kRequired || req.tool_choice_mode == TC::kFunction)) {
    if (g.sampling.grammar)
      return fail(ApiError::invalid_request(
          "tool_choice", "tool_choice 'required' or a named function cannot be combined with '" +
                             req.structured.param + "'"));
    auto gbnf = tool_call_gbnf(api.tool_format(), req.tools,
                               req.tool_choice_mode == TC::kFunction ? req.tool_choice_function : "",
                               req.parallel_tool_calls, reasoning_open);
    if (!gbnf.ok()) return fail(ApiError::invalid_request("tools", gbnf.status().message()));
    auto compiled = grammar::Grammar::parse(*gbnf);
    if (!compiled.ok()) return fail(ApiError::invalid_request("tools", compiled.status().message()));
    g.sampling.grammar = std::make_shared<const grammar::Grammar>(std::move(compiled).value());
  }
  // max_tokens 0 (echo, scoring the prompt): the engine samples one token, the job drops it.
  g.max_new_tokens = static_cast<int32_t>(std::max<int64_t>(1, max_tokens));
  g.n = req.best_of;
  // best_of ranks samples by their tokens' logprobs: asked for even when the client did not.
  g.logprobs = req.logprobs ? req.top_logprobs : (req.best_of > req.n ? 0 : -1);
  g.prompt_logprobs = req.echo && req.logprobs ? req.top_logprobs : -1;
  g.priority = req.priority;
  const TenantConfig* tenant =
      caller.tenant ? &caller.tenants->config.tenants[*caller.tenant] : nullptr;
  // A tenant's request above its max_priority is lowered to it (kBatch > kInteractive).
  if (tenant) g.priority = capped_priority(g.priority, tenant->max_priority);
  // Stop strings are matched here, on the connection's strand (the engine only sees EOS).
  std::vector<std::string> stop = std::move(g.sampling.stop);
  g.sampling.stop.clear();
  g.cache_scope = api.cache_scope(caller, g.prompt_token_ids, req.cache_salt, req.prompt_cache_key);

  auto job = std::make_shared<Job>();
  job->api = &api;
  job->usage = usage;
  job->ex = exchange;
  job->endpoint = endpoint;
  job->stream = req.stream;
  job->n = req.best_of;
  job->n_return = req.n;
  job->prompt_tokens = static_cast<int32_t>(n_prompt);
  job->last_prompt_token = g.prompt_token_ids.back();
  job->top_logprobs = g.logprobs;
  job->emit_logprobs = req.logprobs;
  job->echo = req.echo;
  job->score_only = req.echo && max_tokens == 0;
  if (req.echo) {
    if (req.prompt_is_tokens) {  // as the text of the tokens reads (no space after BOS)
      StreamingDetokenizer d(tok);
      for (int32_t id : g.prompt_token_ids) job->echo_text += d.push(id);
      job->echo_text += d.flush();
    } else {
      job->echo_text = req.prompt_text;
    }
    if (req.logprobs) job->echo_ids = g.prompt_token_ids;
  }
  job->stop = std::move(stop);
  const ToolFormat format = api.tool_format();
  const bool parse_tools = has_tools && req.tool_choice_mode != TC::kNone;
  if (endpoint == Endpoint::kChatCompletions && format != ToolFormat::kNone &&
      (parse_tools || tool_format_has_reasoning(format)))
    job->reply = ReplyParserOptions{.format = format, .parse_tools = parse_tools,
                                    .reasoning_open = reasoning_open, .id_seed = random_seed()};
  job->parallel_tool_calls = req.parallel_tool_calls;
  job->arrival = arrival;
  job->header.id = (endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + random_hex(24);
  job->header.created = static_cast<int64_t>(std::time(nullptr));
  job->header.model = served;
  job->header.include_usage = req.stream && req.include_usage;
  job->init_choices();

  SubmitOptions opts;
  if (tenant) {
    // A tenant's own limit replaces the per-user one: `user` and headers have no say.
    opts.user = "tenant:" + tenant->id;
    opts.max_concurrent = tenant->max_concurrent > 0 ? tenant->max_concurrent : INT32_MAX;
  } else {
    opts.user = user_key(request, req);
  }
  auto on_result = [job](const SubmitResult& r) {
    Metrics& mm = job->api->metrics();
    if (!r.accepted()) {
      mm.request_rejected(submit_result_name(r.kind));
      if (job->usage) job->usage->rejected.fetch_add(1, std::memory_order_relaxed);
      if (job->api->config().log_requests)
        std::fprintf(stderr, "hinge: %s rejected: %s (prompt=%d, waited %.3fs, retry-after %ds)\n",
                     job->header.id.c_str(), submit_result_name(r.kind), job->prompt_tokens,
                     r.queue_seconds, r.retry_after_s);
      if (r.kind != SubmitResult::Kind::kCancelled) {  // else nobody is there to read it
        HttpHeaders h;
        const ApiError e = rejection_error(r, &h);
        job->api->respond_error(job->ex, e, std::move(h));
      }
      job->ex.reset();
      return;
    }
    mm.request_accepted(r.queue_seconds, job->prompt_tokens);
    if (job->usage) job->usage->requests.fetch_add(1, std::memory_order_relaxed);
    if (job->stream) {
      mm.http_response(200);
      job->ex->start_stream(200, "text/event-stream");
    }
  };
  auto sink = [job](const RequestDelta& d) {
    if (job->ex) job->ex->post([job, d] { job->process(d); });
  };
  job->ticket = et.enqueue(std::move(g), std::move(opts), std::move(on_result), std::move(sink));
  // on_close runs on the connection's strand, as process() does: `done` is safe to read. A
  // request whose output was complete (only its last bytes were unwritten) is not an abort.
  exchange->on_close([&et, &m, job](CloseReason why) {
    if (why != CloseReason::kServerStopping && !job->done)
      m.request_aborted(why == CloseReason::kClientTooSlow ? "client_too_slow" : "client_gone");
    et.cancel(job->ticket);
  });
}

}  // namespace hinge::server

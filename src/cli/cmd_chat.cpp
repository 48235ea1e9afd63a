// `hinge chat`: an interactive terminal chat for one person. Each line is a user turn, rendered
// with the model's chat template after the conversation so far (chat/conversation.h), so the
// prompt starts with every token the model has already seen and the prefix cache serves them;
// the reply streams to stdout, a stats line (cached tokens, speed, context used) to stderr.
// Context policies act at turn boundaries (chat/context_fit.h); sessions are saved encrypted
// (cli/chat_sessions.cpp).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include <fmt/format.h>

#include "cli/chat_app.h"
#include "cli/terminal_input.h"
#include "common/units.h"
#include "engine/memory_budget.h"
#include "model/kv_cache.h"

namespace hinge::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// SIGINT stops the reply in flight (not the process) while one of these is alive.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted.store(false);
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &saved_);
  }
  ~InterruptScope() { ::sigaction(SIGINT, &saved_, nullptr); }

 private:
  struct sigaction saved_{};
};

struct Reply {
  std::vector<int32_t> tokens;
  std::string text;
  RequestUsage usage;
  FinishReason finish = FinishReason::kNone;
  double seconds = 0;        // first token to the end
  bool interrupted = false;
  std::optional<pressure::PressureLevel> shed;  // memory pressure ended it at this level
};

StatusOr<Reply> generate(ChatApp& app, const std::vector<int32_t>& prompt, int32_t max_tokens,
                         int32_t keep_tokens, bool stream,
                         std::vector<int32_t> turn_starts = {}) {
  GenerateRequest req;
  req.prompt_token_ids = prompt;
  req.sampling = app.args.sampling;
  req.max_new_tokens = std::max(1, max_tokens);
  req.keep_tokens = keep_tokens;
  req.turn_starts = std::move(turn_starts);
  HINGE_ASSIGN_OR_RETURN(RequestId id, app.engine.add_request(std::move(req)));
  InterruptScope interrupts;
  Reply r;
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> first;
  std::vector<RequestDelta> deltas;
  bool aborted = false;
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  while (app.engine.has_unfinished()) {
    if (g_interrupted.load() && !aborted) {
      aborted = app.engine.abort(id);
      r.interrupted = true;
    }
    if (app.shedder) {
      app.shedder->poll();
      if (!aborted && app.shedder->should_end(prompt_tokens, static_cast<int64_t>(r.tokens.size()),
                                              max_tokens)) {
        aborted = app.engine.abort(id);
        r.shed = app.shedder->level();
      }
    }
    HINGE_RETURN_IF_ERROR(app.engine.step(&deltas));
    for (const RequestDelta& d : deltas) {
      if (!first && !d.token_ids.empty()) first = Clock::now();
      r.tokens.insert(r.tokens.end(), d.token_ids.begin(), d.token_ids.end());
      r.text += d.text;
      if (stream && !d.text.empty()) {
        std::fwrite(d.text.data(), 1, d.text.size(), stdout);
        std::fflush(stdout);
      }
      r.usage = d.usage;
      if (d.finished()) r.finish = d.finish_reason;
    }
  }
  if (first) r.seconds = std::chrono::duration<double>(Clock::now() - *first).count();
  return r;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

void print_help(const ChatApp& app) {
  std::fprintf(stderr,
               "  /reset        forget the conversation (the system prompt stays)\n"
               "  /save NAME    save the conversation%s, encrypted, in %s\n"
               "  /load NAME    continue a saved conversation\n"
               "  /sessions     list the saved sessions\n"
               "  /logout       delete the saved sessions of this key, zero the KV cache, destroy "
               "the key, exit\n"
               "  /quit         exit (also Ctrl-D)\n"
               "  //text        send a line that starts with '/'\n"
               "  Ctrl-C stops a reply.\n",
               app.args.no_session_kv ? "" : " and its KV blocks", app.store.dir().c_str());
}

// One user turn: fit it into the context, stream the reply, record it, print the stats.
void chat_turn(ChatApp& app, const std::string& line) {
  const int32_t ctx = app.engine.max_model_len();
  chat::FitReport report;
  auto summarize = [&](const chat::TurnPrompt& sp, int32_t max_tokens) -> StatusOr<std::string> {
    std::fprintf(stderr, "(context full: the model summarizes the oldest turns...)\n");
    HINGE_ASSIGN_OR_RETURN(Reply s, generate(app, sp.tokens, max_tokens, 0, /*stream=*/false));
    if (s.interrupted) return Status::Error("the summary was interrupted; the turn was not sent");
    if (s.shed)
      return Status::Errorf("the summary was cut short by memory pressure ({}); the turn was not "
                            "sent and the conversation is unchanged",
                            pressure::pressure_level_name(*s.shed));
    return trim(s.text);
  };
  auto prompt = chat::fit_turn(&app.conv, line, app.fit, summarize, &report);
  if (!prompt.ok()) return chat_error(prompt.status().message());
  if (report.summarized_turns > 0 || report.dropped_turns > 0)
    std::fprintf(stderr, "(context: %s%s%s; prompt %d -> %d tokens)\n",
                 report.summarized_turns > 0
                     ? fmt::format("summarized the oldest {} turn{}", report.summarized_turns,
                                   report.summarized_turns == 1 ? "" : "s").c_str() : "",
                 report.summarized_turns > 0 && report.dropped_turns > 0 ? ", " : "",
                 report.dropped_turns > 0
                     ? fmt::format("dropped the oldest {} turn{}", report.dropped_turns,
                                   report.dropped_turns == 1 ? "" : "s").c_str() : "",
                 report.tokens_before, report.tokens_after);
  const bool shift = app.fit.policy == chat::ChatContextPolicy::kShift;
  const int64_t room = static_cast<int64_t>(ctx) - static_cast<int64_t>(prompt->tokens.size());
  const int32_t max_tokens = static_cast<int32_t>(
      shift ? app.args.n_predict : std::min<int64_t>(app.args.n_predict, room));
  int32_t keep = 0;
  std::vector<int32_t> turn_starts;
  if (shift) {
    auto head = app.conv.head_tokens();
    keep = head.ok() ? *head : 0;
    // A reply that outgrows the window drops the history's oldest whole turns first.
    turn_starts = app.conv.turn_starts(line, *prompt);
  }
  auto reply = generate(app, prompt->tokens, max_tokens, keep, /*stream=*/true,
                        std::move(turn_starts));
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!reply.ok()) return chat_error(reply.status().message());
  const size_t prompt_tokens = prompt->tokens.size();
  app.conv.add_turn(line, std::move(prompt).value(), reply->tokens, reply->text);
  if (reply->interrupted) std::fprintf(stderr, "(reply stopped)\n");
  if (reply->shed) {
    app.shedder->count_shed();
    std::fprintf(stderr, "(memory pressure %s: the reply %s after %zu tokens to free memory; the "
                 "conversation goes on)\n", pressure::pressure_level_name(*reply->shed),
                 *reply->shed == pressure::PressureLevel::kCritical ? "ended early" : "was capped",
                 reply->tokens.size());
  }
  if (app.args.no_stats) return;
  const size_t n = reply->tokens.size();
  const double rate = n > 1 && reply->seconds > 0 ? static_cast<double>(n - 1) / reply->seconds : 0;
  std::string extra;
  if (reply->usage.dropped_tokens > 0)
    extra = fmt::format(" | shifted: {} tokens dropped", reply->usage.dropped_tokens);
  if (reply->finish == FinishReason::kLength) extra += " | reply cut at its length limit";
  if (app.shedder && app.shedder->level() != pressure::PressureLevel::kNormal)
    extra += fmt::format(" | memory pressure: {}", pressure::pressure_level_name(app.shedder->level()));
  if (app.shedder && app.shedder->thermal() != pressure::PressureLevel::kNormal)
    extra += fmt::format(" | temperature: {}", pressure::pressure_level_name(app.shedder->thermal()));
  std::fprintf(stderr, "[prompt %zu tokens, %d cached | reply %zu tokens, %.1f tok/s | context %zu of %d%s]\n",
               prompt_tokens, reply->usage.cached_tokens, n, rate,
               std::min<size_t>(app.conv.history().size(), static_cast<size_t>(ctx)), ctx,
               extra.c_str());
  std::fflush(stderr);
}

// Returns false when the chat ends.
bool chat_command_line(ChatApp& app, const std::string& line) {
  const auto space = line.find(' ');
  const std::string cmd = line.substr(0, space);
  const std::string arg = space == std::string::npos ? "" : trim(line.substr(space + 1));
  if (cmd == "/quit" || cmd == "/exit") return false;
  if (cmd == "/help") {
    print_help(app);
  } else if (cmd == "/reset") {
    app.conv.reset();
    std::fprintf(stderr, "(conversation cleared)\n");
  } else if (cmd == "/save" || cmd == "/load") {
    if (arg.empty()) {
      chat_error(cmd + " needs a name: " + cmd + " NAME");
    } else if (cmd == "/save") {
      save_session(app, arg);
    } else {
      load_session(app, arg);
    }
  } else if (cmd == "/sessions") {
    const auto files = app.store.list();
    if (files.empty()) std::fprintf(stderr, "(no saved sessions in %s)\n", app.store.dir().c_str());
    for (const std::string& f : files) std::fprintf(stderr, "  %s\n", f.c_str());
  } else if (cmd == "/logout") {
    logout(app);
    return false;
  } else {
    chat_error("unknown command " + cmd + "; /help lists them");
  }
  return true;
}

}  // namespace

int chat_command(ChatArgs args) {
  chat::ChatContextPolicy policy;
  if (!chat::parse_chat_context_policy(args.engine.context_policy, &policy))
    return fail(fmt::format("--context-policy: unknown policy '{}'; expected error, shift or "
                            "summarize", args.engine.context_policy));
  // The engine itself only ever shifts; summarize rewrites turns before they are sent.
  args.engine.context_policy = policy == chat::ChatContextPolicy::kShift ? "shift" : "error";
  if (!args.seed) args.seed = std::random_device{}();
  args.sampling.seed = *args.seed;
  if (Status st = args.sampling.validate(); !st.ok()) return fail(st.message());
  if (args.n_predict < 1) return fail("--n-predict must be >= 1");
  if (Status st = check_pressure_args(args.pressure); !st.ok()) return fail(st.message());
  args.engine.memory_root = args.pressure.root;  // the cgroup limit, as the pressure watch sees it
  if (args.summary_tokens < 8 || args.summary_tokens > 4096)
    return fail("--summary-tokens: expected 8 to 4096");
  std::string session_dir = args.session_dir;
  if (session_dir.empty()) {
    auto d = chat::SessionStore::default_dir();
    if (!d.ok()) return fail(d.status().message());
    session_dir = *d;
  }
  if (!args.key_file.empty()) {  // a bad key file is reported now, not at the first /save
    auto k = chat::SessionKeyring::from_key_file(args.key_file);
    if (!k.ok()) return fail(k.status().message());
  }

  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  const std::unique_ptr<LoadedModel> loaded = std::move(m).value();
  auto tok = Tokenizer::create(loaded->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());

  std::string template_source = loaded->chat_template;
  std::string template_name = template_source.empty() ? "plain (no chat template)" : "the model's";
  if (!args.chat_template_file.empty()) {
    std::FILE* f = std::fopen(args.chat_template_file.c_str(), "rb");
    if (f == nullptr) return fail("--chat-template-file: cannot read " + args.chat_template_file);
    template_source.assign(1 << 20, '\0');
    template_source.resize(std::fread(template_source.data(), 1, template_source.size(), f));
    const bool more = std::fgetc(f) != EOF;
    std::fclose(f);
    if (more) return fail("--chat-template-file: " + args.chat_template_file + " is over 1 MiB");
    template_name = args.chat_template_file;
  }
  std::optional<ChatTemplate> tmpl;
  if (!template_source.empty()) {
    auto t = ChatTemplate::parse(template_source);
    if (!t.ok())
      return fail((args.chat_template_file.empty() ? args.model + ": chat template"
                                                   : "--chat-template-file " + args.chat_template_file) +
                  ": " + t.status().message());
    tmpl.emplace(std::move(t).value());
  }

  const ModelConfig& cfg = loaded->config;
  // One person, one reply at a time; the context --ctx-size or min(model, 4096).
  auto config = single_sequence_engine_config(args.engine, cfg);
  if (!config.ok()) return fail(config.status().message());
  EngineConfig ec = *config;
  const int64_t ctx_asked = ec.max_model_len;
  auto spec = kv_spec_for(cfg, ec.k_dtype, ec.v_dtype, ec.block_size, ec.kv_groups);
  if (!spec.ok()) return fail(spec.status().message());
  // Room for the conversation twice over: what a rewrite (summary, dropped turns) leaves
  // cached stays until it is needed.
  if (ec.kv_memory_bytes == 0) ec.kv_memory_bytes = spec->bytes_for_tokens(2 * ctx_asked);
  std::unique_ptr<LoadedModel> draft;  // --speculative draft (outlives the engine)
  if (Status st = attach_draft_model(args.engine.draft_model, *loaded, &ec, &draft); !st.ok())
    return fail(st.message());
  auto engine_or = Engine::create(*loaded, &**tok, ec);
  if (!engine_or.ok()) return fail(engine_or.status().message());
  Engine& engine = **engine_or;
  print_memory_breakdown(engine);
  const int64_t ctx = engine.max_model_len();  // a memory budget may have lowered it

  ChatApp app{.args = args,
              .model = *loaded,
              .tok = **tok,
              .engine = engine,
              .conv = chat::Conversation(&**tok, tmpl ? &*tmpl : nullptr, args.system_prompt),
              .fit = {},
              .store = chat::SessionStore(session_dir),
              .layout = {},
              .kdf = {},
              .keys = std::nullopt,
              .files = {}};
  ReplyShedder shedder(&engine, {.enabled = !args.pressure.no_pressure,
                                 .watch = pressure_watch_config(args.pressure),
                                 .max_tokens = static_cast<int32_t>(args.pressure.max_tokens)});
  app.shedder = &shedder;
  app.fit.policy = policy;
  app.fit.context = static_cast<int32_t>(ctx);
  app.fit.reply_reserve = static_cast<int32_t>(
      std::min<int64_t>(args.n_predict, std::max<int64_t>(1, ctx / 4)));
  if (!args.summary_instruction.empty()) app.fit.summary_instruction = args.summary_instruction;
  app.fit.summary_tokens = static_cast<int32_t>(std::min<int64_t>(args.summary_tokens, ctx / 2));
  const EngineStats es = engine.stats();
  const kv::KvSpec& ks = engine.kv_spec();
  app.layout = {.kv_fingerprint = es.kv_fingerprint,
                .k_dtype = std::string(kv::kv_dtype_name(ks.k_dtype)),
                .v_dtype = std::string(kv::kv_dtype_name(ks.v_dtype)),
                .block_size = ks.block_size_tokens,
                .n_layers = ks.n_layers,
                .n_kv_heads = ks.n_kv_heads,
                .head_dim = ks.head_dim,
                .block_bytes = ks.bytes_per_block() * ks.num_groups()};
  if (ec.memory_budget_bytes > 0) {
    // Argon2id's memory comes out of the budget's runtime reserve: at most half of it, more
    // passes to make up for less memory.
    const uint64_t half = static_cast<uint64_t>(memory_reserve_bytes(ec.memory_budget_bytes) / 2);
    app.kdf.memory = std::clamp<uint64_t>(half & ~((uint64_t{1} << 20) - 1), 8u << 20, 64u << 20);
    if (app.kdf.memory < (64u << 20)) app.kdf.ops = 4;
  }

  std::fprintf(stderr,
               "hinge chat: %s | template: %s | context %lld tokens (%s policy) | KV %s | %d "
               "threads | /help for commands\n",
               args.model.c_str(), template_name.c_str(), static_cast<long long>(ctx),
               args.engine.context_policy == "shift" ? "shift"
               : policy == chat::ChatContextPolicy::kSummarize ? "summarize" : "error",
               std::string(kv::kv_dtype_name(ks.k_dtype)).c_str(), ec.threads);
  std::fflush(stderr);
  if (!args.load.empty()) load_session(app, args.load);

  const bool tty = stdin_is_terminal();
  for (;;) {
    if (tty) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::optional<std::string> line = read_line();
    if (!line) break;  // end of input
    std::string text = trim(*line);
    if (text.empty()) continue;
    if (text[0] == '/' && text.rfind("//", 0) != 0) {
      if (!chat_command_line(app, text)) break;
      continue;
    }
    if (text.rfind("//", 0) == 0) text.erase(0, 1);
    chat_turn(app, text);
  }
  if (app.keys) app.keys->destroy();
  return 0;
}

}  // namespace hinge::cli

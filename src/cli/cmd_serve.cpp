// `hinge serve`: the OpenAI-compatible server. Listens first (so /health answers 503 while the
// model loads), loads the model, builds the engine thread with admission control, then serves
// until SIGINT/SIGTERM: /health and new requests turn 503 (the listener stays open, so load
// balancers and clients get an answer rather than a refused connection) while running
// requests finish, for at most --shutdown-grace seconds; then the listener closes, the rest is
// aborted (open streams end with their final chunk), exit 0. SIGHUP re-reads --tenants (a bad
// file is refused with its error; the previous configuration stays).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <sodium.h>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/serve_tiers.h"
#include "cluster/kv_event_publisher.h"
#include "common/units.h"
#include "server/engine_thread.h"
#include "http/server.h"
#include "pressure/pressure_watch.h"
#include "server/api_server.h"

namespace hinge::cli {

namespace {

Status check(const ServeArgs& a) {
  if (a.port < 0 || a.port > 65535) return Status::Errorf("--port must be in [0, 65535], got {}", a.port);
  if (a.admin_port < -1 || a.admin_port > 65535)
    return Status::Errorf("--admin-port must be in [0, 65535], got {}", a.admin_port);
  if (a.max_queue < 0) return Status::Errorf("--max-queue must be >= 0, got {}", a.max_queue);
  if (a.max_concurrent_per_user < 0)
    return Status::Errorf("--max-concurrent-per-user must be >= 0, got {}", a.max_concurrent_per_user);
  if (!(a.max_request_share > 0 && a.max_request_share <= 1))
    return Status::Errorf("--max-request-share must be in (0, 1], got {}", a.max_request_share);
  if (!(a.interactive_reserve >= 0 && a.interactive_reserve < 1))
    return Status::Errorf("--interactive-reserve must be in [0, 1), got {}", a.interactive_reserve);
  if (!(a.kv_headroom >= 0 && a.kv_headroom < 0.5))
    return Status::Errorf("--kv-headroom must be in [0, 0.5), got {}", a.kv_headroom);
  if (!(a.queue_timeout > 0)) return Status::Errorf("--queue-timeout must be > 0, got {}", a.queue_timeout);
  if (!(a.cache_ttl >= 0 && a.cache_ttl <= 1e9))
    return Status::Errorf("--cache-ttl must be in [0, 1e9] seconds, got {}", a.cache_ttl);
  if (!a.tenants.empty() && !a.api_key.empty())
    return Status::Error("--api-key and --tenants exclude each other: give the key to a tenant "
                         "in the tenants file (hinge keygen prints one and its digest)");
  if (!a.api_key.empty() && !a.api_key_file.empty())
    return Status::Error("give the key once: --api-key or --api-key-file");
  if (!a.tenants.empty() && !a.api_key_file.empty())
    return Status::Error("--api-key-file and --tenants exclude each other: give the key to a "
                         "tenant in the tenants file (hinge keygen prints one and its digest)");
  if (!a.api_key.empty() && a.api_key.size() < 16)
    return Status::Error("--api-key must be at least 16 characters (hinge keygen prints one)");
  HINGE_RETURN_IF_ERROR(check_pressure_args(a.pressure));
  if (!(a.shutdown_grace >= 0))
    return Status::Errorf("--shutdown-grace must be >= 0, got {}", a.shutdown_grace);
  if (a.io_threads < 1 || a.io_threads > 64)
    return Status::Errorf("--io-threads must be in [1, 64], got {}", a.io_threads);
  if (a.request_workers < 1 || a.request_workers > 64)
    return Status::Errorf("--request-workers must be in [1, 64], got {}", a.request_workers);
  if (a.max_connections < 0)
    return Status::Errorf("--max-connections must be >= 0 (0: from the open-files limit), got {}",
                          a.max_connections);
  for (const auto& [name, v] : {std::pair{"--keep-alive-timeout", a.keep_alive_timeout},
                                {"--header-timeout", a.header_timeout},
                                {"--write-stall-timeout", a.write_stall_timeout}})
    if (!(v > 0 && v <= 86400)) return Status::Errorf("{} must be in (0, 86400] seconds, got {}", name, v);
  for (const std::string& n : a.model_names)
    if (n.empty() || n.size() > 256)
      return Status::Errorf("--model-name: names must be 1 to 256 characters");
  return Status::Ok();
}

// A size flag ("4MiB") within [lo, hi] bytes.
StatusOr<uint64_t> size_flag(const char* name, const std::string& text, uint64_t lo, uint64_t hi) {
  const auto v = parse_bytes(text);
  if (!v) return Status::Errorf("{}: cannot parse '{}'; expected a size such as 64KiB or 8MiB", name, text);
  if (*v < lo || *v > hi)
    return Status::Errorf("{} must be in [{}, {}], got {}", name, format_bytes(lo), format_bytes(hi),
                          format_bytes(*v));
  return *v;
}

std::string default_model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::string stem = p.has_extension() && p.extension() == ".gguf" ? p.stem().string()
                                                                     : p.filename().string();
  return stem.empty() ? "hinge" : stem;
}

// The first `max` bytes of a small secret file named by `flag`.
StatusOr<std::string> read_secret_file(const char* flag, const std::string& path, size_t max) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::Errorf("{}: cannot read {}", flag, path);
  std::string bytes(max, '\0');
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  return bytes;
}

StatusOr<server::CacheSecret> read_cache_secret(const std::string& path) {
  if (path.empty()) return server::random_cache_secret();
  auto bytes = read_secret_file("--cache-secret-file", path, 256);
  if (!bytes.ok()) return bytes.status();
  auto s = server::parse_cache_secret(*bytes);
  if (!s.ok()) return s.status().with_context("--cache-secret-file " + path);
  return s;
}

// --api-key-file: the key is the file's first line.
StatusOr<server::KeyDigest> read_api_key_digest(const std::string& path) {
  auto bytes = read_secret_file("--api-key-file", path, 4096);
  if (!bytes.ok()) return bytes.status();
  std::string& key = *bytes;
  key.resize(std::min(key.size(), key.find_first_of("\r\n")));
  const bool ok = key.size() >= 16;
  const server::KeyDigest d = server::key_digest(key);
  sodium_memzero(key.data(), key.size());
  if (!ok)
    return Status::Errorf("--api-key-file {}: the key (its first line) must be at least 16 "
                          "characters (hinge keygen prints one)", path);
  return d;
}

}  // namespace

int serve_command(const ServeArgs& args) {
  if (Status st = check(args); !st.ok()) return fail(st.message());
  EngineOptionsArgs engine_args = args.engine;
  engine_args.memory_root = args.pressure.root;  // the cgroup limit, as the pressure watch sees it
  auto config = make_engine_config(engine_args);
  if (!config.ok()) return fail(config.status().message());

  // Signals go to sigwait below, never to a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // re-reads --tenants
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // Listen first: /health is 503 until the model is loaded.
  std::atomic<server::ApiServer*> api_ptr{nullptr};
  http::ServerConfig hc;
  hc.host = args.host;
  hc.port = static_cast<uint16_t>(args.port);
  hc.io_threads = static_cast<int32_t>(args.io_threads);
  hc.max_connections = args.max_connections;
  hc.keep_alive_timeout_s = args.keep_alive_timeout;
  hc.header_timeout_s = args.header_timeout;
  hc.write_stall_timeout_s = args.write_stall_timeout;
  hc.cors_origins = args.cors_origins;
  hc.tls_cert_file = args.tls_cert;
  hc.tls_key_file = args.tls_key;
  {
    auto rate = size_flag("--min-body-rate", args.min_body_rate, 1, 1ull << 40);
    auto out = size_flag("--max-output-buffer", args.max_output_buffer, 64u << 10, 1ull << 32);
    auto body = size_flag("--max-body", args.max_body, 1u << 10, 1ull << 32);
    for (const Status& st : {rate.status(), out.status(), body.status()})
      if (!st.ok()) return fail(st.message());
    hc.min_body_bytes_per_s = static_cast<double>(*rate);
    hc.max_output_bytes = *out;
    hc.max_body_bytes = *body;
  }
  auto cache_secret = read_cache_secret(args.cache_secret_file);
  if (!cache_secret.ok()) return fail(cache_secret.status().message());
  if (!args.tenants.empty()) {  // fail fast: before the port is taken and the model loaded
    auto t = server::TenantRegistry::read(args.tenants);
    if (!t.ok()) return fail("--tenants: " + t.status().message());
  }
  std::string chat_template_file;  // llama-server's --chat-template-file: a Jinja file
  if (!args.chat_template_file.empty()) {
    constexpr size_t kMax = 1 << 20;
    auto bytes = read_secret_file("--chat-template-file", args.chat_template_file, kMax + 1);
    if (!bytes.ok()) return fail(bytes.status().message());
    if (bytes->empty() || bytes->size() > kMax)
      return fail("--chat-template-file: " + args.chat_template_file +
                  (bytes->empty() ? " is empty" : " is larger than 1 MiB"));
    chat_template_file = std::move(bytes).value();
  }
  auto http = http::Server::start(hc, [&](http::HttpRequest r, http::ExchangePtr ex) {
    if (server::ApiServer* api = api_ptr.load()) return api->handle(std::move(r), std::move(ex));
    http::HttpResponse resp;
    resp.status = 503;
    resp.headers.emplace_back("Retry-After", "5");
    if (r.path == "/health") {
      resp.body = R"({"status":"loading"})";
    } else {
      const server::ApiError e = server::ApiError::unavailable(
          "loading", "the model is still loading; retry shortly");
      resp.body = server::api_error_body(e);
    }
    ex->respond(std::move(resp));
  });
  if (!http.ok()) return fail(http.status().message());
  const std::string url = (*http)->url();
  std::unique_ptr<http::Server> admin_http;
  if (args.admin_port >= 0) {
    http::ServerConfig ac = hc;
    ac.host = args.admin_host;
    ac.port = static_cast<uint16_t>(args.admin_port);
    ac.io_threads = 1;
    ac.cors_origins.clear();  // no browser origin may read or drive the key-less listener
    auto a = http::Server::start(ac, [&](http::HttpRequest r, http::ExchangePtr ex) {
      if (server::ApiServer* api = api_ptr.load())
        return api->handle(std::move(r), std::move(ex), server::ApiServer::Listener::kAdmin);
      http::HttpResponse resp;
      resp.status = 503;
      resp.headers.emplace_back("Retry-After", "5");
      resp.body = R"({"status":"loading"})";
      ex->respond(std::move(resp));
    });
    if (!a.ok()) return fail("--admin-port: " + a.status().message());
    admin_http = std::move(a).value();
    std::fprintf(stderr, "hinge: admin listener (metrics, stats, dashboard, /admin/*; no key) on %s\n",
                 admin_http->url().c_str());
  }
  std::fprintf(stderr, "hinge: listening on %s, loading %s\n", url.c_str(), args.model.c_str());

  auto m = load_model_with_progress(args.model, args.tokenizer);
  if (!m.ok()) return fail(m.status().message());
  const std::unique_ptr<LoadedModel> loaded = std::move(m).value();
  auto tok = Tokenizer::create(loaded->vocab);
  if (!tok.ok()) return fail(tok.status().with_context(args.model).message());
  EngineConfig engine_config = *config;
  engine_config.detokenize = false;  // the server detokenizes on its I/O threads
  // -c above the model's context: lowered with one warning (0: the model's context).
  const int64_t model_ctx = loaded->config.context_length;
  engine_config.max_model_len =
      static_cast<int32_t>(resolve_ctx_size(engine_config.max_model_len, model_ctx, model_ctx));
  // KV events: the publisher outlives the engine (declared first, destroyed last).
  const std::string model_name =
      args.model_names.empty() ? default_model_name(args.model) : args.model_names[0];
  std::unique_ptr<cluster::KvEventPublisher> events;
  std::string events_topic;
  if (!args.kv_events.empty()) {
    cluster::KvEventPublisherOptions po;
    po.endpoint = args.kv_events;
    po.replay_endpoint = args.kv_events_replay;
    po.topic = args.kv_events_topic.empty()
                   ? cluster::kv_event_topic(args.host, (*http)->port(), model_name)
                   : args.kv_events_topic;
    events_topic = po.topic;
    auto format = cluster::parse_kv_event_format(args.kv_events_format);
    if (!format.ok()) return fail(format.status().message());
    po.wire.format = *format;
    po.wire.block_size = engine_config.block_size;
    po.wire.medium = args.kv_events_medium;
    po.buffer_batches = static_cast<size_t>(args.kv_events_buffer);
    auto p = cluster::KvEventPublisher::start(po);
    if (!p.ok()) return fail(p.status().message());
    events = std::move(p).value();
    engine_config.kv_event_sink = events.get();
    std::fprintf(stderr, "hinge: KV events (%s) on %s, topic %s%s%s\n",
                 args.kv_events_format.c_str(), events->endpoint().c_str(), po.topic.c_str(),
                 events->replay_endpoint().empty() ? "" : ", replay on ",
                 events->replay_endpoint().c_str());
  } else if (!args.kv_events_replay.empty()) {
    return fail("--kv-events-replay needs --kv-events");
  }
  std::unique_ptr<LoadedModel> draft;  // --speculative draft (outlives the engine)
  if (Status st = attach_draft_model(args.engine.draft_model, *loaded, &engine_config, &draft); !st.ok())
    return fail(st.message());
  auto engine = Engine::create(*loaded, tok->get(), engine_config);
  if (!engine.ok()) return fail(engine.status().message());
  print_memory_breakdown(**engine);
  // The KV tiers outlive the engine thread (declared before it).
  auto kv_tiers = open_kv_tiers(args, **engine, *cache_secret);
  if (!kv_tiers.ok()) return fail(kv_tiers.status().message());
  const std::vector<kv::KvTierStore*> tiers = kv_tiers->tiers;
  const EngineConfig ec = (*engine)->config();
  const int64_t kv_bytes = (*engine)->stats().kv_bytes_total;

  sched::AdmissionConfig ac;
  ac.headroom_fraction = args.kv_headroom;
  ac.interactive_reserve_fraction = args.interactive_reserve;
  ac.max_request_share = args.max_request_share;
  ac.max_queue = static_cast<int32_t>(args.max_queue);
  ac.max_concurrent_per_user = static_cast<int32_t>(args.max_concurrent_per_user);
  ac.queue_timeout_s = args.queue_timeout;
  PressurePolicyConfig pp;
  pp.max_tokens = static_cast<int32_t>(args.pressure.max_tokens);
  auto et = std::make_unique<EngineThread>(std::move(engine).value(), ac, pp);
  std::unique_ptr<pressure::PressureWatch> watch;
  if (!args.pressure.no_pressure) {
    const pressure::PressureWatchConfig wc = pressure_watch_config(args.pressure);
    watch = std::make_unique<pressure::PressureWatch>(
        wc, [e = et.get()](pressure::PressureLevel level, pressure::PressureLevel thermal,
                           const std::string& reasons) {
          e->set_pressure(level, reasons, thermal);
        });
  }

  server::ApiServerConfig sc;
  sc.model_name = model_name;
  if (args.model_names.size() > 1)
    sc.model_aliases.assign(args.model_names.begin() + 1, args.model_names.end());
  sc.worker_threads = static_cast<int32_t>(args.request_workers);
  sc.n_vocab = static_cast<int32_t>(loaded->config.n_vocab);
  sc.log_requests = !args.quiet;
  sc.tool_format = args.tool_format;
  sc.metrics_compat_vllm = args.metrics_compat == "vllm";
  sc.cache_secret = *cache_secret;
  sc.kv_tiers = tiers;
  if (events) {
    sc.kv_events_endpoint = events->endpoint();
    sc.kv_events_replay = events->replay_endpoint();
    sc.kv_events_topic = events_topic;
  }
  if (!args.api_key.empty()) sc.api_key_digest = server::key_digest(args.api_key);
  if (!args.api_key_file.empty()) {
    auto d = read_api_key_digest(args.api_key_file);
    if (!d.ok()) return fail(d.status().message());
    sc.api_key_digest = *d;
  }
  if (!args.tenants.empty()) {
    server::TenantRegistry::Options to;
    to.path = args.tenants;
    to.secret = *cache_secret;
    to.default_ttl_s = args.cache_ttl;
    to.block_size = et->block_size();
    to.kv_tiers = tiers;
    auto reg = server::TenantRegistry::open(to, **tok, *et);
    if (!reg.ok()) return fail("--tenants: " + reg.status().message());
    sc.tenants = std::move(reg).value();
  } else if (args.cache_ttl > 0) {
    // The shared namespace is owner 0: the TTL applies to it.
    et->call([ttl = args.cache_ttl](Engine& e) {
      e.set_cache_owner_policy(kv::kSharedOwner, 1.0, ttl);
      return 0;
    });
  }
  auto api = server::ApiServer::create(
      sc, **tok, chat_template_file.empty() ? loaded->chat_template : chat_template_file, *et);
  if (!api.ok() && !chat_template_file.empty())
    return fail("--chat-template-file " + args.chat_template_file + ": " + api.status().message());
  if (!api.ok()) return fail(api.status().message());
  if ((*api)->tool_format() != ToolFormat::kNone)
    std::fprintf(stderr, "hinge: tool calls and reasoning parsed as %s (%s)\n",
                 tool_format_name((*api)->tool_format()),
                 args.tool_format == "auto" ? "from the chat template" : "--tool-format");
  (*api)->set_transport_stats([h = http->get()] { return h->stats(); });
  api_ptr.store(api->get());
  std::fprintf(stderr,
               "hinge: %s: context %d, KV %s in %d blocks of %d tokens (%s/%s), %d threads, chat "
               "template: %s\n",
               sc.model_name.c_str(), et->max_model_len(),
               format_bytes(static_cast<uint64_t>(kv_bytes)).c_str(), et->num_blocks(),
               ec.block_size, std::string(kv::kv_dtype_name(ec.k_dtype)).c_str(),
               std::string(kv::kv_dtype_name(ec.v_dtype)).c_str(),
               ec.threads,
               !chat_template_file.empty()        ? "--chat-template-file"
               : loaded->chat_template.empty() ? "plain fallback"
                                               : "the model's");
  if (sc.tenants) {
    const auto snap = sc.tenants->snapshot();
    std::fprintf(stderr,
                 "hinge: %zu tenants from %s, each with its own prefix cache; %zu public "
                 "prefixes; /metrics, /v1/stats, / and /admin/* need an admin key\n",
                 snap->config.tenants.size(), args.tenants.c_str(),
                 snap->config.public_prefixes.size());
  } else {
    std::fprintf(stderr,
                 "hinge: no --tenants: the prefix cache is shared by all clients (one may learn "
                 "from cached_tokens or timing what another sent); %s\n",
                 sc.api_key_digest ? "/v1/* needs the --api-key key" : "no key needed");
  }
  std::printf("hinge: serving %s on %s\n", sc.model_name.c_str(), url.c_str());
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (!sc.tenants) {
      std::fprintf(stderr, "hinge: SIGHUP: no --tenants file to re-read; ignored\n");
      continue;
    }
    auto n = sc.tenants->reload();
    if (n.ok())
      std::fprintf(stderr, "hinge: SIGHUP: tenants reloaded: %d tenants\n", *n);
    else
      std::fprintf(stderr, "hinge: SIGHUP: tenants file refused (the previous configuration "
                           "stays): %s\n", n.status().message().c_str());
  }
  std::fprintf(stderr, "hinge: %s: stopping (grace %.1f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               args.shutdown_grace);
  (*api)->begin_shutdown();  // /health and new requests: 503 from now on
  (*http)->begin_drain();    // keep-alive connections end after their answer
  et->drain();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(args.shutdown_grace));
  while (et->num_active() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int32_t left = et->num_active();  // still queued or running at the deadline
  (*http)->stop_accepting();
  if (watch) watch->stop();
  et->stop();  // aborts what is left; their streams get a final chunk
  for (int i = 0; i < 250 && (*http)->pending_answers() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (*http)->stop();
  if (admin_http) admin_http->stop();
  api_ptr.store(nullptr);
  std::fprintf(stderr,
               "hinge: stopped: %lld requests accepted, %d ended at shutdown (running: aborted, "
               "queued: 503)\n",
               static_cast<long long>((*api)->metrics().accepted()), left);
  return 0;
}

}  // namespace hinge::cli

// hinge serve with --tenants, end to end on a loopback port (in process): every isolation test
// is paired, both halves in one test — the same tenant's repeat hits (the test could fail) and
// another tenant's identical request misses, whatever client fields or headers it sends; a
// permission bump, a TTL and a purge make a tenant's own entries miss; a public prefix is
// shared for exactly its full blocks; a tenant's quota keeps another tenant's hot prefix; auth
// answers 401 / 403 with OpenAI's error JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "server/engine_thread.h"
#include "http/server.h"
#include "http_test_client.h"
#include "model_test_util.h"
#include "server/api_server.h"
#include "server/tenancy.h"
#include "test_util.h"

namespace hinge {
namespace {

using testing::http_call;
using testing::HttpReply;
using testing::load_or_die;
using testing::shared_path;

const std::string kKeyAcme = "hk-test-acme-0123456789abcdef";
const std::string kKeyGlobex = "hk-test-globex-0123456789abcdef";
const std::string kKeyShort = "hk-test-short-0123456789abcdef";
const std::string kKeyBulk = "hk-test-bulk-0123456789abcdef";
const std::string kKeyAdmin = "hk-test-admin-0123456789abcdef";
const std::string kSystem =
    "You are the support agent of a toy shop. You answer questions about toys, orders and "
    "returns. You are kind and brief, and you never make up facts about the shop or its toys.";

std::string hex(const std::string& key) { return server::digest_hex(server::key_digest(key)); }

// The tenants file: acme and globex (plain), short (2 s TTL), bulk (a small cache share).
std::string tenants_json(int64_t acme_version = 1) {
  nlohmann::json j;
  j["tenants"] = nlohmann::json::array(
      {{{"id", "acme"}, {"api_keys_sha256", {hex(kKeyAcme)}}, {"permission_version", acme_version}},
       {{"id", "globex"}, {"api_keys_sha256", {hex(kKeyGlobex)}}},
       {{"id", "short"}, {"api_keys_sha256", {hex(kKeyShort)}}, {"cache_ttl_s", 2}},
       {{"id", "bulk"}, {"api_keys_sha256", {hex(kKeyBulk)}}, {"cache_share", 0.05}}});
  j["admin_api_keys_sha256"] = {hex(kKeyAdmin)};
  j["public_prefixes"] = {{{"id", "support-system"}, {"text", kSystem}}};
  return j.dump(2);
}

struct TenantServer {
  std::string path;
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<EngineThread> engine;
  std::unique_ptr<server::ApiServer> api;
  std::unique_ptr<http::Server> http;
  uint16_t port = 0;

  explicit TenantServer(sched::AdmissionConfig ac = {}, int64_t kv_bytes = 8 << 20) {
    path = testing::temp_dir() + "/tenants.json";
    write(tenants_json());
    model = load_or_die(shared_path("models/stories260K.gguf"));
    HINGE_CHECK(model != nullptr);
    tok = std::move(Tokenizer::create(model->vocab)).value();
    EngineConfig c;
    c.threads = 1;
    c.kv_memory_bytes = kv_bytes;
    c.max_model_len = 512;
    c.detokenize = false;
    engine = std::make_unique<EngineThread>(std::move(Engine::create(*model, tok.get(), c)).value(), ac);
    server::ApiServerConfig sc;
    sc.model_name = "stories";
    sc.n_vocab = static_cast<int32_t>(model->config.n_vocab);
    sc.cache_secret = server::random_cache_secret();
    server::TenantRegistry::Options to;
    to.path = path;
    to.secret = sc.cache_secret;
    to.block_size = engine->block_size();
    auto reg = server::TenantRegistry::open(to, *tok, *engine);
    HINGE_CHECK_MSG(reg.ok(), "{}", reg.status().message());
    sc.tenants = std::move(reg).value();
    api = std::move(server::ApiServer::create(sc, *tok, "", *engine)).value();
    http::ServerConfig hc;
    hc.port = 0;
    http = std::move(http::Server::start(hc, [this](http::HttpRequest r, http::ExchangePtr ex) {
             api->handle(std::move(r), std::move(ex));
           })).value();
    port = http->port();
  }
  ~TenantServer() {
    engine->stop();
    http->stop();
  }
  void write(const std::string& text) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  std::optional<HttpReply> call(const std::string& method, const std::string& target,
                                const std::string& key, const std::string& body = {},
                                const std::string& headers = {}) const {
    std::string h = headers;
    if (!key.empty()) h += "Authorization: Bearer " + key + "\r\n";
    return http_call(port, method, target, body, h);
  }
  // POST /v1/completions; the reply's cached_tokens (-1 when not 200).
  int cached(const std::string& key, nlohmann::json body, const std::string& headers = {},
             int* prompt_tokens = nullptr) const {
    body["max_tokens"] = 1;
    body["temperature"] = 0;
    auto r = call("POST", "/v1/completions", key, body.dump(), headers);
    if (!r || r->status != 200) {
      ADD_FAILURE() << (r ? r->body : "no reply");
      return -1;
    }
    const auto j = nlohmann::json::parse(r->body);
    if (prompt_tokens) *prompt_tokens = j["usage"]["prompt_tokens"];
    return j["usage"]["prompt_tokens_details"]["cached_tokens"];
  }
};

// A ~80-token story prompt, distinct per n from its first block on.
std::string story(int n) {
  return "Story number " + std::to_string(n) +
         ". Once upon a time there was a little girl named Lily. She loved to play outside in the "
         "park with her friends. One day she found a big red ball under a tree and she was happy.";
}
nlohmann::json prompt(const std::string& text) { return {{"prompt", text}}; }

void expect_error(const std::optional<HttpReply>& r, int status, const std::string& code,
                  const std::string& what) {
  ASSERT_TRUE(r.has_value()) << what;
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  const auto j = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << r->body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << what;
  EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param")) << what;
  if (!code.empty()) {
    EXPECT_EQ(j["error"]["code"], code) << what << ": " << r->body;
  }
}

TEST(ServerTenants, AnotherTenantNeverHitsWhateverFieldsOrHeadersItSends) {
  TenantServer s;
  // Plain: the same tenant's repeat hits, another tenant's identical request does not.
  const auto p = prompt(story(1));
  EXPECT_EQ(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyAcme, p), 0);
  EXPECT_EQ(s.cached(kKeyGlobex, p), 0);
  EXPECT_GT(s.cached(kKeyGlobex, p), 0);  // globex's own repeat hits its own copy

  // Each spoof on a fresh prompt acme has cached (its repeat hits first: the pair).
  struct Spoof {
    const char* what;
    nlohmann::json extra;  // fields added to both of acme's requests and to globex's
    std::string globex_headers;
  };
  const std::vector<Spoof> spoofs = {
      {"cache_salt", {{"cache_salt", "acme-salt"}}, ""},
      {"prompt_cache_key", {{"prompt_cache_key", "acme-conversation-7"}}, ""},
      {"user", {{"user", "acme"}}, ""},
      {"salt+key+user", {{"cache_salt", "s"}, {"prompt_cache_key", "k"}, {"user", "acme"}}, ""},
      {"headers", {}, "X-Tenant: acme\r\nX-Tenant-Id: acme\r\nOpenAI-Organization: acme\r\n"
                      "OpenAI-Project: acme\r\nX-User: acme\r\nX-Api-Key: " + kKeyAcme + "\r\n"},
  };
  int n = 100;
  for (const Spoof& sp : spoofs) {
    auto body = prompt(story(++n));
    for (auto& [k, v] : sp.extra.items()) body[k] = v;
    EXPECT_EQ(s.cached(kKeyAcme, body), 0) << sp.what;
    EXPECT_GT(s.cached(kKeyAcme, body), 0) << sp.what;
    EXPECT_EQ(s.cached(kKeyGlobex, body, sp.globex_headers), 0) << sp.what;
  }
  // The tenant id in fields the API does not know: ignored or refused, never a hit.
  {
    auto body = prompt(story(++n));
    EXPECT_EQ(s.cached(kKeyAcme, body), 0);
    EXPECT_GT(s.cached(kKeyAcme, body), 0);
    for (const char* field : {"tenant", "tenant_id", "organization", "namespace", "metadata"}) {
      auto b = body;
      b[field] = std::string(field) == "metadata" ? nlohmann::json{{"tenant", "acme"}} : nlohmann::json("acme");
      b["max_tokens"] = 1;
      auto r = s.call("POST", "/v1/completions", kKeyGlobex, b.dump());
      ASSERT_TRUE(r);
      ASSERT_TRUE(r->status == 200 || r->status == 400) << field << ": " << r->body;
      if (r->status == 200) {
        EXPECT_EQ(nlohmann::json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
            << field;
      }
      // Its own earlier request of this prompt (if any) would hit: start from another prompt.
      body = prompt(story(++n));
      EXPECT_EQ(s.cached(kKeyAcme, body), 0);
      EXPECT_GT(s.cached(kKeyAcme, body), 0);
    }
  }
  // A salt splits a tenant's own cache too.
  {
    auto body = prompt(story(++n));
    EXPECT_EQ(s.cached(kKeyAcme, body), 0);
    EXPECT_GT(s.cached(kKeyAcme, body), 0);
    body["cache_salt"] = "another-scope";
    EXPECT_EQ(s.cached(kKeyAcme, body), 0);
    EXPECT_GT(s.cached(kKeyAcme, body), 0);
  }
  EXPECT_TRUE(s.engine->wait_idle(10));
}

TEST(ServerTenants, PermissionBumpPurgeAndTtlMakeATenantsOwnEntriesMiss) {
  TenantServer s;
  // Permission bump through the admin API: older entries miss at once, the new version caches.
  const auto p = prompt(story(1));
  EXPECT_EQ(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyAcme, p), 0);
  auto r = s.call("POST", "/admin/tenants/acme", kKeyAdmin, R"({"permission_version": 2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_GT(nlohmann::json::parse(r->body)["dropped_blocks"].get<int>(), 0);
  EXPECT_EQ(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyAcme, p), 0);

  // The same through the file and /admin/reload.
  s.write(tenants_json(7));
  r = s.call("POST", "/admin/reload", kKeyAdmin);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyAcme, p), 0);
  // A bad file is refused with its line and field; the previous configuration stays.
  s.write("{\n  \"tenants\": [{\"id\": \"acme\", \"api_keys_sha256\": [\"" + hex(kKeyAcme) +
          "\"],\n  \"cache_share\": 7}]\n}\n");
  r = s.call("POST", "/admin/reload", kKeyAdmin);
  expect_error(r, 400, "invalid_tenants_file", "bad reload");
  EXPECT_NE(r->body.find("line 3: tenants[0].cache_share"), std::string::npos) << r->body;
  EXPECT_GT(s.cached(kKeyAcme, p), 0);  // version 7 still current: still hits
  EXPECT_EQ(s.cached(kKeyGlobex, prompt(story(2))), 0);  // globex still known
  s.write(tenants_json(7));

  // Purge: answers the count; nothing of acme hits afterwards; globex keeps its entries.
  EXPECT_GT(s.cached(kKeyGlobex, prompt(story(2))), 0);
  r = s.call("POST", "/admin/tenants/acme/purge", kKeyAdmin);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_GT(nlohmann::json::parse(r->body)["purged_blocks"].get<int>(), 0);
  EXPECT_EQ(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyAcme, p), 0);
  EXPECT_GT(s.cached(kKeyGlobex, prompt(story(2))), 0);
  expect_error(s.call("POST", "/admin/tenants/nobody/purge", kKeyAdmin), 404, "", "unknown tenant");

  // TTL (2 s for `short`): a repeat within it hits, one after it does not.
  const auto q = prompt(story(3));
  EXPECT_EQ(s.cached(kKeyShort, q), 0);
  EXPECT_GT(s.cached(kKeyShort, q), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  EXPECT_EQ(s.cached(kKeyShort, q), 0);
  EXPECT_TRUE(s.engine->wait_idle(10));
}

TEST(ServerTenants, PublicPrefixIsSharedForExactlyItsFullBlocks) {
  TenantServer s;
  const std::string text_a = kSystem + " Customer: where is my order number 12345, please?";
  int prompt_a = 0;
  EXPECT_EQ(s.cached(kKeyAcme, prompt(text_a), {}, &prompt_a), 0);
  // The declared prefix's full blocks, as this prompt tokenizes (BOS + text).
  const std::vector<int32_t> sys = s.tok->encode(kSystem, true, false);
  const std::vector<int32_t> all = s.tok->encode(text_a, true, false);
  size_t common = 0;
  while (common < sys.size() && common < all.size() && sys[common] == all[common]) ++common;
  const int bs = s.engine->block_size();
  const int public_tokens = static_cast<int>(common) / bs * bs;
  ASSERT_GE(public_tokens, 2 * bs) << "the test needs a prefix of 2+ full blocks";
  ASSERT_GT(prompt_a, public_tokens + bs) << "the test needs tenant blocks after the prefix";
  // acme's repeat: everything but the last block.
  EXPECT_EQ(s.cached(kKeyAcme, prompt(text_a)), (prompt_a - 1) / bs * bs);
  // globex, the same prompt: exactly the public blocks, not one block more.
  EXPECT_EQ(s.cached(kKeyGlobex, prompt(text_a)), public_tokens);
  // globex with another question after the prefix: the public blocks again.
  EXPECT_EQ(s.cached(kKeyGlobex, prompt(kSystem + " Customer: can I return a broken kite?")),
            public_tokens);
  // The public hits are counted apart (admins see them in /v1/stats).
  auto st = s.call("GET", "/v1/stats", kKeyAdmin);
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200) << st->body;
  const auto j = nlohmann::json::parse(st->body);
  EXPECT_GE(j["prefix_cache"]["public_hit_tokens"].get<int>(), 2 * public_tokens);
  EXPECT_TRUE(s.engine->wait_idle(10));
}

TEST(ServerTenants, AuthIs401WithoutAValidKeyAnd403OnTheWrongRoutes) {
  TenantServer s;
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  for (const std::string target : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    for (const std::string& key : {std::string(), std::string("hk-nobody"), hex(kKeyAcme)}) {
      auto r = s.call("POST", target, key, body);
      expect_error(r, 401, "invalid_api_key", target + " key=" + key.substr(0, 8));
      EXPECT_EQ(r->header("www-authenticate"), "Bearer");
      EXPECT_EQ(r->body.find(kKeyAcme), std::string::npos);
    }
  }
  expect_error(s.call("GET", "/v1/models", ""), 401, "invalid_api_key", "models without a key");
  // A tenant's key on the admin and observability routes: 403.
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/metrics"}, {"GET", "/v1/stats"}, {"GET", "/"}, {"POST", "/admin/reload"},
           {"POST", "/admin/tenants/acme/purge"}, {"POST", "/admin/tenants/globex"}})
    expect_error(s.call(method, target, kKeyAcme, method == "POST" ? "{}" : ""), 403, "forbidden",
                 "tenant on " + target);
  // An admin key does not call the API as a tenant.
  expect_error(s.call("POST", "/v1/completions", kKeyAdmin, body), 403, "forbidden", "admin on the API");
  expect_error(s.call("GET", "/v1/usage", kKeyAdmin), 403, "forbidden", "admin usage");
  // Open: health. Allowed: the admin routes with the admin key.
  auto h = s.call("GET", "/health", "");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const std::string target : {"/metrics", "/v1/stats", "/"}) {
    auto r = s.call("GET", target, kKeyAdmin);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << target;
  }
  // A tenant reads its own usage, and only its own.
  auto ok = s.call("POST", "/v1/completions", kKeyAcme, body);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  auto u = s.call("GET", "/v1/usage", kKeyAcme);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, 200) << u->body;
  const auto j = nlohmann::json::parse(u->body);
  EXPECT_EQ(j["tenant"], "acme");
  EXPECT_EQ(j["requests"], 1);
  EXPECT_GT(j["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(j["completion_tokens"], 2);
  auto g = nlohmann::json::parse(s.call("GET", "/v1/usage", kKeyGlobex)->body);
  EXPECT_EQ(g["tenant"], "globex");
  EXPECT_EQ(g["requests"], 0);
  // Admins see every tenant's counters and hit rates.
  const auto st = nlohmann::json::parse(s.call("GET", "/v1/stats", kKeyAdmin)->body);
  ASSERT_TRUE(st["tenants"].is_array());
  EXPECT_EQ(st["tenants"].size(), 4u);
  EXPECT_EQ(st["tenants"][0]["id"], "acme");
  EXPECT_TRUE(st["tenants"][0].contains("prefix_hit_rate"));
  // And in /metrics, labelled by tenant id (never by key).
  const std::string m = s.call("GET", "/metrics", kKeyAdmin)->body;
  EXPECT_NE(m.find("hinge:tenant_requests_total{model_name=\"stories\",tenant=\"acme\"} 1"),
            std::string::npos) << m.substr(0, 2000);
  EXPECT_NE(m.find("hinge:tenant_completion_tokens_total{model_name=\"stories\",tenant=\"acme\"} 2"),
            std::string::npos);
  EXPECT_NE(m.find("hinge:kv_quota_evictions_total"), std::string::npos);
  EXPECT_EQ(m.find(kKeyAcme), std::string::npos);
  EXPECT_EQ(m.find(hex(kKeyAcme)), std::string::npos);
  EXPECT_TRUE(s.engine->wait_idle(10));
}

TEST(ServerTenants, OneTenantsThousandPromptsLeaveAnotherTenantsHotPrefixCached) {
  // 8 MiB of stories260K KV: 819 blocks. bulk may keep 5% of them (40) cached while free.
  TenantServer s;
  const int total = s.engine->num_blocks();
  const auto hot = prompt(story(0));
  EXPECT_EQ(s.cached(kKeyGlobex, hot), 0);
  const int hot_hit = s.cached(kKeyGlobex, hot);
  ASSERT_GT(hot_hit, 0);
  // 1000 distinct prompts of ~90 tokens (5-6 blocks each: 5000+ blocks, 6x the pool), from 2
  // client threads, as token ids (no tokenizing cost).
  std::atomic<int> failures{0};
  auto sender = [&](int first) {
    std::mt19937 rng(static_cast<uint32_t>(first));
    for (int i = first; i < 1000; i += 2) {
      nlohmann::json ids = nlohmann::json::array({1});
      for (int k = 0; k < 90; ++k) ids.push_back(3 + static_cast<int>(rng() % 500));
      auto r = s.call("POST", "/v1/completions", kKeyBulk,
                      nlohmann::json{{"prompt", ids}, {"max_tokens", 1}}.dump());
      if (!r || r->status != 200) ++failures;
    }
  };
  std::thread t0(sender, 0), t1(sender, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(s.engine->wait_idle(10));
  // globex's hot prefix still hits, whole.
  EXPECT_EQ(s.cached(kKeyGlobex, hot), hot_hit);
  const auto st = nlohmann::json::parse(s.call("GET", "/v1/stats", kKeyAdmin)->body);
  EXPECT_GT(st["prefix_cache"]["quota_evictions"].get<int>(), 0);
  EXPECT_LE(st["kv"]["blocks_cached"].get<int>(), total / 20 + 1 + hot_hit / 16 + 1);
  EXPECT_TRUE(s.engine->wait_idle(10));
}

}  // namespace
}  // namespace hinge

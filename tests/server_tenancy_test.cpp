// server/tenancy: the tenants file's strict parser (errors name line and field), key digests,
// the namespace derivation (keyed, length-prefixed: distinct tuples never collide, salts only
// split a tenant's own cache), authentication.
#include "server/tenancy.h"

#include <gtest/gtest.h>

#include <set>

namespace hinge::server {
namespace {

// SHA-256("key-a") etc., as `hinge keygen` / sha256sum would print them.
std::string hex_of(std::string_view key) { return digest_hex(key_digest(key)); }

std::string file_with(const std::string& tenant_fields, const std::string& top = "") {
  return "{\n  \"tenants\": [\n    {\"id\": \"acme\",\n     \"api_keys_sha256\": [\"" +
         hex_of("key-acme") + "\"]" + tenant_fields + "}\n  ]" + top + "\n}\n";
}

TEST(ServerTenancy, KeyDigestIsSha256OfTheKeyBytes) {
  // The well-known SHA-256 of "abc".
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto d = parse_digest_hex(hex_of("abc"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, key_digest("abc"));
  EXPECT_FALSE(parse_digest_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
  EXPECT_FALSE(parse_digest_hex(hex_of("abc").substr(1)));
  EXPECT_FALSE(parse_digest_hex(hex_of("abc") + "0"));
}

TEST(ServerTenancy, NewKeysAreRandomBase64Url) {
  std::set<std::string> keys;
  for (int i = 0; i < 50; ++i) {
    const std::string k = new_api_key();
    ASSERT_EQ(k.rfind("hk-", 0), 0u) << k;
    EXPECT_EQ(k.size(), 3u + 43u) << k;  // 32 bytes, base64url without padding
    for (char c : k.substr(3))
      EXPECT_TRUE(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << k;
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), 50u);
}

TEST(ServerTenancy, ParsesTheDocumentedShape) {
  const std::string text = R"({
  "tenants": [
    {"id": "acme",
     "api_keys_sha256": [")" + hex_of("k1") + R"(", ")" + hex_of("k2") + R"("],
     "permission_version": 3,
     "cache_ttl_s": 3600,
     "cache_share": 0.25,
     "max_concurrent": 8,
     "max_priority": "batch"},
    {"id": "globex", "api_keys_sha256": [")" + hex_of("k3") + R"("]}
  ],
  "admin_api_keys_sha256": [")" + hex_of("admin") + R"("],
  "public_prefixes": [{"id": "support-bot-system", "text": "You are a helpful support agent."}]
})";
  auto c = parse_tenants(text);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->tenants.size(), 2u);
  const TenantConfig& a = c->tenants[0];
  EXPECT_EQ(a.id, "acme");
  EXPECT_EQ(a.key_digests.size(), 2u);
  EXPECT_EQ(a.permission_version, 3);
  EXPECT_EQ(a.cache_ttl_s, 3600.0);
  EXPECT_EQ(a.cache_share, 0.25);
  EXPECT_EQ(a.max_concurrent, 8);
  EXPECT_EQ(a.max_priority, sched::Priority::kBatch);
  const TenantConfig& g = c->tenants[1];
  EXPECT_EQ(g.permission_version, 0);
  EXPECT_FALSE(g.cache_ttl_s.has_value());
  EXPECT_EQ(g.cache_share, 1.0);
  EXPECT_EQ(g.max_concurrent, 0);
  EXPECT_EQ(g.max_priority, sched::Priority::kInteractive);
  EXPECT_EQ(c->admin_digests.size(), 1u);
  ASSERT_EQ(c->public_prefixes.size(), 1u);
  EXPECT_EQ(c->public_prefixes[0].id, "support-bot-system");
  EXPECT_EQ(c->find("globex"), &c->tenants[1]);
  EXPECT_EQ(c->find("nobody"), nullptr);
}

// Each bad file: the error names the line and the field, on one line, and never quotes a key.
TEST(ServerTenancy, BadFilesNameLineAndField) {
  struct Case {
    std::string text;
    std::string want;  // a substring of the error
  };
  const std::vector<Case> cases = {
      {file_with(",\n     \"cache_share\": 1.5"), "line 5: tenants[0].cache_share: must be in (0, 1], got 1.5"},
      {file_with(",\n     \"cache_share\": 0"), "tenants[0].cache_share: must be in (0, 1]"},
      {file_with(",\n     \"permission_version\": -1"), "line 5: tenants[0].permission_version: must be an integer >= 0"},
      {file_with(",\n     \"permission_version\": 1.5"), "tenants[0].permission_version"},
      {file_with(",\n     \"max_priority\": \"urgent\""), "line 5: tenants[0].max_priority"},
      {file_with(",\n     \"max_concurrent\": -2"), "tenants[0].max_concurrent"},
      {file_with(",\n     \"cache_ttl_s\": \"1h\""), "tenants[0].cache_ttl_s: must be a number"},
      {file_with(",\n     \"colour\": 1"), "line 5: tenants[0].colour: unknown field"},
      {file_with(",\n     \"id\": \"dup\""), "duplicate key"},
      {file_with("", ",\n  \"admins\": []"), "admins: unknown field"},
      {file_with("", ",\n  \"public_prefixes\": [{\"id\": \"p\", \"text\": \"\"}]"), "public_prefixes[0].text: must be a non-empty string"},
      {"{\"tenants\": [{\"id\": \"a\", \"api_keys_sha256\": [\"not-hex\"]}]}", "line 1: tenants[0].api_keys_sha256[0]: must be the SHA-256 digest"},
      {"{\"tenants\": [{\"id\": \"a\", \"api_keys_sha256\": []}]}", "tenants[0].api_keys_sha256: needs at least one key digest"},
      {"{\"tenants\": [{\"id\": \"a b\", \"api_keys_sha256\": [\"" + hex_of("x") + "\"]}]}", "tenants[0].id: must be 1 to 64 characters"},
      {"{\"tenants\": [{\"api_keys_sha256\": [\"" + hex_of("x") + "\"]}]}", "tenants[0]: missing field `id`"},
      {"{\"tenants\": [\n{\"id\": \"a\", \"api_keys_sha256\": [\"" + hex_of("x") + "\"]},\n{\"id\": \"a\", \"api_keys_sha256\": [\"" + hex_of("y") + "\"]}]}", "line 3: tenants[1].id: tenant `a` is defined twice"},
      {"{\"tenants\": [\n{\"id\": \"a\", \"api_keys_sha256\": [\"" + hex_of("x") + "\"]},\n{\"id\": \"b\", \"api_keys_sha256\": [\"" + hex_of("x") + "\"]}]}", "tenants[1].api_keys_sha256[0]: this key digest is listed twice"},
      {"{\n\"tenants\": [\n{\"id\": \"a\",,}]}", "line 3: not valid JSON"},
      {"{}", "tenants: missing"},
      {"[]", "must be an object"},
      {"", "not valid JSON"},
      {"{\"tenants\": {}}", "tenants: must be an array"},
      {std::string(60, '[') + std::string(60, ']'), "nested deeper than"},
  };
  for (const Case& c : cases) {
    auto r = parse_tenants(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    const std::string m = r.status().message();
    EXPECT_NE(m.find(c.want), std::string::npos) << "got: " << m << "\nwant: " << c.want;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.find(hex_of("key-acme")), std::string::npos) << m;
  }
}

TEST(ServerTenancy, NamespacesAreDistinctPerTupleAndKeyedBySecret) {
  const CacheSecret s1 = random_cache_secret(), s2 = random_cache_secret();
  ASSERT_NE(s1, s2);
  using O = std::optional<std::string>;
  const auto ns = [&](std::string_view t, int64_t v, O salt, O key) {
    return derive_namespace(s1, t, v, salt, key);
  };
  // Deterministic under one secret, different under another.
  EXPECT_EQ(ns("acme", 3, {}, {}), ns("acme", 3, {}, {}));
  EXPECT_NE(ns("acme", 3, {}, {}), derive_namespace(s2, "acme", 3, {}, {}));
  // Every field matters, and the length prefixes keep shifted boundaries apart.
  std::set<std::array<uint64_t, 4>> seen;
  for (const auto& n :
       {ns("acme", 3, {}, {}), ns("acme", 4, {}, {}), ns("acm", 3, {}, {}), ns("acme", 3, "", {}),
        ns("acme", 3, {}, ""), ns("acme", 3, "x", {}), ns("acme", 3, {}, "x"), ns("acme", 3, "x", "y"),
        ns("acme", 3, "xy", {}), ns("acme", 3, "x", "") , ns("acmex", 3, {}, {}), ns("", 0, {}, {}),
        ns("a", 3, "cme", {})})
    EXPECT_TRUE(seen.insert(n.words).second);
  // A salt never reaches another tenant: (B, salt of A) is not A's namespace.
  EXPECT_NE(ns("globex", 0, "acme-salt", {}), ns("acme", 0, "acme-salt", {}));
  EXPECT_NE(public_prefix_namespace(s1, "acme"), ns("acme", 0, {}, {}));
}

TEST(ServerTenancy, AuthenticateFindsTenantsAndAdmins) {
  auto c = parse_tenants(file_with("", ",\n  \"admin_api_keys_sha256\": [\"" + hex_of("key-admin") + "\"]"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(authenticate(*c, "key-acme").kind, Principal::Kind::kTenant);
  EXPECT_EQ(authenticate(*c, "key-acme").tenant_index, 0u);
  EXPECT_EQ(authenticate(*c, "key-admin").kind, Principal::Kind::kAdmin);
  EXPECT_EQ(authenticate(*c, "key-acm").kind, Principal::Kind::kNone);
  EXPECT_EQ(authenticate(*c, "").kind, Principal::Kind::kNone);
  // The digest itself is not a key.
  EXPECT_EQ(authenticate(*c, hex_of("key-acme")).kind, Principal::Kind::kNone);
  EXPECT_EQ(bearer_key("Bearer abc"), "abc");
  EXPECT_EQ(bearer_key("bearer abc"), "abc");
  EXPECT_EQ(bearer_key("Basic abc"), "");
  EXPECT_EQ(bearer_key(""), "");
}

TEST(ServerTenancy, PriorityIsLoweredToTheTenantsMaxNeverRaised) {
  using sched::Priority;
  EXPECT_EQ(capped_priority(Priority::kInteractive, Priority::kBatch), Priority::kBatch);
  EXPECT_EQ(capped_priority(Priority::kBatch, Priority::kBatch), Priority::kBatch);
  EXPECT_EQ(capped_priority(Priority::kBatch, Priority::kInteractive), Priority::kBatch);
  EXPECT_EQ(capped_priority(Priority::kInteractive, Priority::kInteractive), Priority::kInteractive);
}

TEST(ServerTenancy, CacheSecretFile) {
  auto raw = parse_cache_secret(std::string(32, 'x'));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)[0], 'x');
  auto hex = parse_cache_secret(std::string(64, 'a') + "\n");
  ASSERT_TRUE(hex.ok()) << hex.status().message();
  EXPECT_EQ((*hex)[0], 0xaa);
  EXPECT_FALSE(parse_cache_secret("short").ok());
  EXPECT_FALSE(parse_cache_secret(std::string(64, 'g')).ok());
}

}  // namespace
}  // namespace hinge::server

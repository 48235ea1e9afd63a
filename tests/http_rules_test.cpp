// http/rules.h: methods, transfer codings, Expect, CORS policy and URL hosts.
#include <gtest/gtest.h>

#include "http/rules.h"

namespace hinge::http {
namespace {

TEST(HttpRules, MethodsAreCaseSensitiveTokens) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
    EXPECT_FALSE(check_method(m).has_value()) << m;
  auto r = check_method("get");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->message.find("use GET"), std::string::npos) << r->message;
  r = check_method("Post");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 400);
  r = check_method("BREW");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 501);
  // Hostile bytes are not echoed raw.
  r = check_method(std::string("X\r\n\"\x01", 5));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message.find('\r'), std::string::npos);
  EXPECT_EQ(r->message.find('"'), std::string::npos);
}

TEST(HttpRules, OnlyChunkedTransferCoding) {
  EXPECT_FALSE(check_transfer_encoding("").has_value());
  EXPECT_FALSE(check_transfer_encoding("chunked").has_value());
  EXPECT_FALSE(check_transfer_encoding(" Chunked ").has_value());
  for (const char* te : {"gzip", "xchunked", "gzip, chunked", "chunked, gzip", "identity"}) {
    auto r = check_transfer_encoding(te);
    ASSERT_TRUE(r.has_value()) << te;
    EXPECT_EQ(r->status, 501) << te;
  }
}

TEST(HttpRules, ExpectContinue) {
  EXPECT_TRUE(expects_continue("100-continue"));
  EXPECT_TRUE(expects_continue(" 100-Continue"));
  EXPECT_FALSE(expects_continue(""));
  EXPECT_FALSE(expects_continue("200-ok"));
}

TEST(HttpRules, CorsPolicy) {
  auto none = CorsPolicy::parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
  EXPECT_TRUE(none->headers("http://a.example", false, "").empty());

  auto p = CorsPolicy::parse({"http://localhost:3000", "https://App.Example"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->allows("http://localhost:3000"));
  EXPECT_TRUE(p->allows("https://app.example"));
  EXPECT_FALSE(p->allows("http://localhost:3001"));
  EXPECT_FALSE(p->allows(""));
  auto h = p->headers("http://localhost:3000", /*preflight=*/true, "authorization, content-type");
  auto get = [&](const std::string& name) {
    for (const auto& [k, v] : h)
      if (k == name) return v;
    return std::string();
  };
  EXPECT_EQ(get("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(get("Vary"), "Origin");
  EXPECT_NE(get("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(get("Access-Control-Allow-Headers"), "authorization, content-type");
  // Requested headers that are not plain names are not echoed.
  h = p->headers("http://localhost:3000", true, "x\r\ny");
  EXPECT_EQ(get("Access-Control-Allow-Headers"), "Authorization, Content-Type");

  auto any = CorsPolicy::parse({"*"});
  ASSERT_TRUE(any.ok());
  h = any->headers("http://whatever.example", false, "");
  EXPECT_EQ(get("Access-Control-Allow-Origin"), "*");

  for (const char* bad : {"localhost:3000", "ftp://x", "http://", "http://a/path", "http://a b"}) {
    auto r = CorsPolicy::parse({bad});
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--cors-origins"), std::string::npos);
    }
  }
}

TEST(HttpRules, UrlHostBracketsIpv6) {
  EXPECT_EQ(url_host("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(url_host("::1"), "[::1]");
  EXPECT_EQ(url_host("[::1]"), "[::1]");
  EXPECT_EQ(url_host("localhost"), "localhost");
}

}  // namespace
}  // namespace hinge::http

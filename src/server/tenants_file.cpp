// parse_tenants (server/tenancy.h): strict parsing of the tenants file. nlohmann parses the
// JSON; a small scanner of our own walks the same text first to learn the line of every value
// (nlohmann keeps no positions), to refuse duplicate keys (nlohmann keeps the last silently)
// and to bound the nesting depth. Errors: "line N: <field>: <what is wrong>".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "server/tenancy.h"

namespace hinge::server {

namespace {

// A key path as error messages show it: control characters as '?' (one line, no escapes),
// at most 200 bytes.
std::string printable(const std::string& path) {
  std::string shown = path.substr(0, 200);
  for (char& ch : shown)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return shown;
}

using Json = nlohmann::json;
constexpr int kMaxDepth = 16;
constexpr size_t kMaxFileBytes = 16 << 20;

// Lines of values by path ("tenants[0].id"), duplicate keys, depth.
class LineScan {
 public:
  explicit LineScan(std::string_view t) : t_(t) {}
  Status run() {
    value("", 0);
    return error_;
  }
  int line_of(const std::string& path) const {
    auto it = lines_.find(path);
    return it == lines_.end() ? 1 : it->second;
  }

 private:
  bool more() const { return i_ < t_.size() && error_.ok(); }
  void ws() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '\n') ++line_;
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
      ++i_;
    }
  }
  std::string string_body() {  // at the opening quote; the raw text between the quotes
    std::string out;
    ++i_;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) out += t_[i_++];
      if (t_[i_] == '\n') ++line_;
      out += t_[i_++];
    }
    ++i_;
    return out;
  }
  void value(const std::string& path, int depth) {
    ws();
    if (!more()) return;
    if (depth > kMaxDepth) {
      error_ = Status::Errorf("line {}: nested deeper than {} levels", line_, kMaxDepth);
      return;
    }
    lines_.try_emplace(path, line_);
    const char c = t_[i_];
    if (c == '{') return object(path, depth);
    if (c == '[') return array(path, depth);
    if (c == '"') {
      string_body();
      return;
    }
    while (i_ < t_.size() && std::string_view(",]} \t\r\n").find(t_[i_]) == std::string_view::npos)
      ++i_;
  }
  void object(const std::string& path, int depth) {
    ++i_;
    std::set<std::string> keys;
    for (;;) {
      ws();
      if (!more() || t_[i_] == '}') break;
      if (t_[i_] != '"') return;  // malformed: nlohmann reports it
      const int key_line = line_;
      std::string key = string_body();
      const std::string child = path.empty() ? key : path + "." + key;
      if (!keys.insert(key).second && error_.ok()) {
        error_ = Status::Errorf("line {}: {}: duplicate key", key_line, printable(child));
        return;
      }
      ws();
      if (!more() || t_[i_] != ':') return;
      ++i_;
      value(child, depth + 1);
      ws();
      if (!more() || t_[i_] != ',') break;
      ++i_;
    }
    if (i_ < t_.size()) ++i_;
  }
  void array(const std::string& path, int depth) {
    ++i_;
    for (size_t k = 0;; ++k) {
      ws();
      if (!more() || t_[i_] == ']') break;
      value(fmt::format("{}[{}]", path, k), depth + 1);
      ws();
      if (!more() || t_[i_] != ',') break;
      ++i_;
    }
    if (i_ < t_.size()) ++i_;
  }

  std::string_view t_;
  size_t i_ = 0;
  int line_ = 1;
  std::unordered_map<std::string, int> lines_;
  Status error_ = Status::Ok();
};

class Checker {
 public:
  explicit Checker(const LineScan& scan) : scan_(scan) {}
  Status fail(const std::string& path, const std::string& what) const {
    return Status::Errorf("line {}: {}: {}", scan_.line_of(path), printable(path), what);
  }
  Status only_fields(const Json& obj, const std::string& path,
                     std::initializer_list<const char*> allowed) const {
    if (!obj.is_object()) return fail(path, "must be an object");
    for (const auto& item : obj.items()) {
      const std::string& k = item.key();  // (clang 14 lambdas cannot capture a binding)
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; })) {
        std::string list;
        for (const char* a : allowed) list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
        return fail(path.empty() ? k.substr(0, 64) : path + "." + k.substr(0, 64),
                    fmt::format("unknown field (known: {})", list));
      }
    }
    return Status::Ok();
  }
  Status digests(const Json& v, const std::string& path, bool need_one,
                 std::vector<KeyDigest>* out) const {
    if (!v.is_array()) return fail(path, "must be an array of SHA-256 digests (64 lowercase hex digits)");
    if (need_one && v.empty())
      return fail(path, "needs at least one key digest (`hinge keygen` makes a key and its digest)");
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", path, i);
      const auto d = v[i].is_string() ? parse_digest_hex(v[i].get_ref<const std::string&>())
                                      : std::nullopt;
      if (!d)
        return fail(p, "must be the SHA-256 digest of a key as 64 lowercase hex digits (never "
                       "the key itself; `hinge keygen` prints both)");
      out->push_back(*d);
    }
    return Status::Ok();
  }

 private:
  const LineScan& scan_;
};

bool valid_id(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
  });
}

// nlohmann's reason, without the exception prefix or the "last read" bytes.
std::string json_reason(const char* what) {
  std::string s = what;
  if (auto p = s.find("] "); p != std::string::npos && s.rfind("[json.exception", 0) == 0)
    s.erase(0, p + 2);
  if (auto p = s.find("; last read"); p != std::string::npos) {
    const auto q = s.find("; expected", p);
    s.erase(p, q == std::string::npos ? std::string::npos : q - p);
  }
  return s;
}

Status parse_tenant(const Checker& c, const Json& t, const std::string& p, TenantConfig* out) {
  HINGE_RETURN_IF_ERROR(c.only_fields(t, p, {"id", "api_keys_sha256", "permission_version",
                                             "cache_ttl_s", "cache_share", "max_concurrent",
                                             "max_priority"}));
  if (!t.contains("id")) return c.fail(p, "missing field `id`");
  if (!t["id"].is_string() || !valid_id(t["id"].get_ref<const std::string&>()))
    return c.fail(p + ".id", "must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
  out->id = t["id"].get<std::string>();
  if (!t.contains("api_keys_sha256")) return c.fail(p, "missing field `api_keys_sha256`");
  HINGE_RETURN_IF_ERROR(c.digests(t["api_keys_sha256"], p + ".api_keys_sha256", true, &out->key_digests));
  if (t.contains("permission_version")) {
    const Json& v = t["permission_version"];
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      return c.fail(p + ".permission_version", "must be an integer >= 0");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return c.fail(p + ".permission_version", "is too large");
    out->permission_version = v.get<int64_t>();
  }
  auto number = [&](const char* name, double lo, double hi, bool lo_open, double* dst) -> Status {
    const Json& v = t[name];
    const std::string f = p + "." + name;
    if (!v.is_number()) return c.fail(f, "must be a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
      return c.fail(f, fmt::format("must be in {}{}, {}], got {}", lo_open ? "(" : "[", lo, hi, x));
    *dst = x;
    return Status::Ok();
  };
  if (t.contains("cache_ttl_s")) {
    double ttl = 0;
    HINGE_RETURN_IF_ERROR(number("cache_ttl_s", 0, 365.0 * 86400, false, &ttl));
    out->cache_ttl_s = ttl;
  }
  if (t.contains("cache_share")) HINGE_RETURN_IF_ERROR(number("cache_share", 0, 1, true, &out->cache_share));
  if (t.contains("max_concurrent")) {
    const Json& v = t["max_concurrent"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000000)
      return c.fail(p + ".max_concurrent", "must be an integer in [0, 1000000] (0: no cap)");
    out->max_concurrent = static_cast<int32_t>(v.get<int64_t>());
  }
  if (t.contains("max_priority")) {
    const Json& v = t["max_priority"];
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    if (s == "interactive")
      out->max_priority = sched::Priority::kInteractive;
    else if (s == "batch")
      out->max_priority = sched::Priority::kBatch;
    else
      return c.fail(p + ".max_priority", "must be \"interactive\" or \"batch\"");
  }
  return Status::Ok();
}

}  // namespace

const TenantConfig* TenantsConfig::find(std::string_view id) const {
  for (const TenantConfig& t : tenants)
    if (t.id == id) return &t;
  return nullptr;
}

StatusOr<TenantsConfig> parse_tenants(std::string_view text) {
  if (text.size() > kMaxFileBytes)
    return Status::Errorf("the tenants file is {} bytes; at most {} are read", text.size(), kMaxFileBytes);
  LineScan scan(text);
  HINGE_RETURN_IF_ERROR(scan.run());
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::out_of_range& e) {  // e.g. a number too large for a double
    return Status::Errorf("the tenants file is not valid JSON: {}", json_reason(e.what()));
  } catch (const Json::parse_error& e) {
    const size_t at = std::min<size_t>(e.byte, text.size());
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(at > 0 ? at - 1 : 0), '\n'));
    return Status::Errorf("line {}: not valid JSON: {}", line, json_reason(e.what()));
  }
  const Checker c(scan);
  HINGE_RETURN_IF_ERROR(c.only_fields(root, "", {"tenants", "admin_api_keys_sha256", "public_prefixes"}));
  if (!root.contains("tenants")) return c.fail("tenants", "missing (an array of tenant objects)");
  const Json& ts = root["tenants"];
  if (!ts.is_array()) return c.fail("tenants", "must be an array of tenant objects");
  TenantsConfig out;
  std::set<std::string> ids;
  std::set<KeyDigest> digests;
  auto unique_digests = [&](const std::vector<KeyDigest>& ds, const std::string& p) -> Status {
    for (size_t i = 0; i < ds.size(); ++i)
      if (!digests.insert(ds[i]).second)
        return c.fail(fmt::format("{}[{}]", p, i), "this key digest is listed twice (a key names one principal)");
    return Status::Ok();
  };
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string p = fmt::format("tenants[{}]", i);
    TenantConfig t;
    HINGE_RETURN_IF_ERROR(parse_tenant(c, ts[i], p, &t));
    if (!ids.insert(t.id).second) return c.fail(p + ".id", fmt::format("tenant `{}` is defined twice", t.id));
    HINGE_RETURN_IF_ERROR(unique_digests(t.key_digests, p + ".api_keys_sha256"));
    out.tenants.push_back(std::move(t));
  }
  if (root.contains("admin_api_keys_sha256")) {
    HINGE_RETURN_IF_ERROR(c.digests(root["admin_api_keys_sha256"], "admin_api_keys_sha256", false, &out.admin_digests));
    HINGE_RETURN_IF_ERROR(unique_digests(out.admin_digests, "admin_api_keys_sha256"));
  }
  if (root.contains("public_prefixes")) {
    const Json& ps = root["public_prefixes"];
    if (!ps.is_array()) return c.fail("public_prefixes", "must be an array of {\"id\", \"text\"} objects");
    std::set<std::string> pids;
    for (size_t i = 0; i < ps.size(); ++i) {
      const std::string p = fmt::format("public_prefixes[{}]", i);
      HINGE_RETURN_IF_ERROR(c.only_fields(ps[i], p, {"id", "text"}));
      if (!ps[i].contains("id") || !ps[i]["id"].is_string() || !valid_id(ps[i]["id"].get<std::string>()))
        return c.fail(p + ".id", "must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
      if (!ps[i].contains("text") || !ps[i]["text"].is_string() || ps[i]["text"].get_ref<const std::string&>().empty())
        return c.fail(p + ".text", "must be a non-empty string");
      PublicPrefixConfig pp{ps[i]["id"].get<std::string>(), ps[i]["text"].get<std::string>()};
      if (!pids.insert(pp.id).second) return c.fail(p + ".id", fmt::format("public prefix `{}` is defined twice", pp.id));
      out.public_prefixes.push_back(std::move(pp));
    }
  }
  return out;
}

}  // namespace hinge::server

// The tenant side of ApiServer: a request's cache scope, GET /v1/usage and the /admin/* routes.
#include <fmt/format.h>

#include "server/api_server.h"
#include "server/openai_response.h"

namespace hinge::server {

namespace {

HttpResponse json_ok(const nlohmann::json& j) {
  HttpResponse r;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

}  // namespace

kv::CacheScope ApiServer::cache_scope(const Caller& caller, std::span<const int32_t> prompt,
                                      const std::optional<std::string>& cache_salt,
                                      const std::optional<std::string>& prompt_cache_key) const {
  if (config_.tenants && caller.tenants && caller.tenant)
    return config_.tenants->scope_for(*caller.tenants, *caller.tenant, prompt, cache_salt,
                                      prompt_cache_key);
  // No tenants: one shared namespace (owner 0), split only by the request's own salts.
  return kv::CacheScope(derive_namespace(config_.cache_secret, "", 0, cache_salt, prompt_cache_key));
}

std::shared_ptr<TenantUsage> ApiServer::usage_of(const Caller& caller) const {
  if (!caller.tenants || !caller.tenant) return nullptr;
  return caller.tenants->usage[*caller.tenant];
}

void ApiServer::handle_usage(const Caller& caller, const ExchangePtr& ex) {
  const auto u = usage_of(caller);
  if (!u) return respond_error(ex, ApiError::server_error("no tenant for this key"));
  nlohmann::json j;
  j["object"] = "usage";
  j["tenant"] = caller.tenants->config.tenants[*caller.tenant].id;
  j["requests"] = u->requests.load();
  j["rejected"] = u->rejected.load();
  j["prompt_tokens"] = u->prompt_tokens.load();
  j["cached_tokens"] = u->cached_tokens.load();
  j["completion_tokens"] = u->completion_tokens.load();
  respond(ex, json_ok(j));
}

nlohmann::json ApiServer::tenants_json() const {
  nlohmann::json out = nlohmann::json::array();
  if (!config_.tenants) return out;
  const auto s = config_.tenants->snapshot();
  for (size_t i = 0; i < s->config.tenants.size(); ++i) {
    const TenantUsage& u = *s->usage[i];
    const int64_t prompt = u.prompt_tokens.load(), cached = u.cached_tokens.load();
    out.push_back({{"id", s->config.tenants[i].id},
                   {"permission_version", s->config.tenants[i].permission_version},
                   {"requests", u.requests.load()},
                   {"rejected", u.rejected.load()},
                   {"prompt_tokens", prompt},
                   {"cached_tokens", cached},
                   {"completion_tokens", u.completion_tokens.load()},
                   {"prefix_hit_rate", prompt > 0 ? static_cast<double>(cached) / prompt : 0.0}});
  }
  return out;
}

std::string ApiServer::tenant_metrics() const {
  if (!config_.tenants) return {};
  const auto s = config_.tenants->snapshot();
  std::string o;
  // Tenant ids are [A-Za-z0-9._-] (tenancy.h): safe as label values.
  auto family = [&](const char* name, const char* help, auto field) {
    o += fmt::format("# HELP hinge:{} {}\n# TYPE hinge:{} counter\n", name, help, name);
    for (size_t i = 0; i < s->config.tenants.size(); ++i)
      o += fmt::format("hinge:{}{{{},tenant=\"{}\"}} {}\n", name, metrics_.labels(),
                       s->config.tenants[i].id, (s->usage[i].get()->*field).load());
  };
  family("tenant_requests_total", "Generation requests accepted, by tenant.", &TenantUsage::requests);
  family("tenant_requests_rejected_total", "Generation requests rejected, by tenant.",
         &TenantUsage::rejected);
  family("tenant_prompt_tokens_total", "Prompt tokens of finished requests, by tenant.",
         &TenantUsage::prompt_tokens);
  family("tenant_cached_tokens_total",
         "Of those, found in the prefix cache (the tenant's own or a public prefix), by tenant.",
         &TenantUsage::cached_tokens);
  family("tenant_completion_tokens_total", "Completion tokens, by tenant.",
         &TenantUsage::completion_tokens);
  return o;
}

void ApiServer::handle_admin(const HttpRequest& r, const ExchangePtr& ex) {
  TenantRegistry& reg = *config_.tenants;
  if (r.path == "/admin/reload") {
    auto n = reg.reload();
    if (!n.ok()) {
      std::fprintf(stderr, "hinge: tenants file refused (the previous configuration stays): %s\n",
                   n.status().message().c_str());
      ApiError e = ApiError::invalid_request("", "the tenants file was refused and the previous "
                                                 "configuration stays: " + n.status().message());
      e.code = "invalid_tenants_file";
      return respond_error(ex, e);
    }
    std::fprintf(stderr, "hinge: tenants reloaded: %d tenants\n", *n);
    return respond(ex, json_ok({{"reloaded", true}, {"tenants", *n}}));
  }
  // /admin/tenants/{id} or /admin/tenants/{id}/purge
  std::string rest = r.path.substr(std::string("/admin/tenants/").size());
  const bool purge = rest.size() > 6 && rest.compare(rest.size() - 6, 6, "/purge") == 0;
  if (purge) rest.resize(rest.size() - 6);
  if (rest.empty() || rest.find('/') != std::string::npos)
    return respond_error(ex, ApiError::not_found(
                                 "use POST /admin/tenants/{id} or /admin/tenants/{id}/purge"));
  const std::string& id = rest;
  if (purge) {
    auto n = reg.purge(id);
    if (!n.ok()) return respond_error(ex, ApiError::not_found(n.status().message(), "id"));
    return respond(ex, json_ok({{"id", id}, {"purged_blocks", *n}}));
  }
  const auto body = nlohmann::json::parse(r.body, nullptr, false);
  if (!body.is_object() || !body.contains("permission_version") ||
      !body["permission_version"].is_number_integer() ||
      body["permission_version"].get<int64_t>() < 0 || body.size() != 1)
    return respond_error(ex, ApiError::invalid_request(
                                 "permission_version",
                                 "the body must be {\"permission_version\": <integer >= 0>}"));
  const int64_t v = body["permission_version"].get<int64_t>();
  auto n = reg.set_permission_version(id, v);
  if (!n.ok()) return respond_error(ex, ApiError::not_found(n.status().message(), "id"));
  respond(ex, json_ok({{"id", id}, {"permission_version", v}, {"dropped_blocks", *n}}));
}

}  // namespace hinge::server

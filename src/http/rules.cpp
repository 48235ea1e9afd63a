#include "http/rules.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

namespace hinge::http {

namespace {

constexpr std::array<std::string_view, 9> kMethods = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Printable ASCII without quotes, at most 32 characters: safe to put in a message.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 32))
    out += (c > 32 && c < 127 && c != '"' && c != '\\') ? c : '?';
  return out;
}

// A header-name list as browsers send in Access-Control-Request-Headers: tokens, commas, spaces.
bool plain_header_list(std::string_view s) {
  if (s.empty() || s.size() > 1024) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' ||
           c == ' ';
  });
}

}  // namespace

std::optional<Rejection> check_method(std::string_view method) {
  for (std::string_view m : kMethods) {
    if (method == m) return std::nullopt;
    if (iequals(method, m))
      return Rejection{400, fmt::format("malformed request: HTTP methods are case-sensitive; "
                                        "use {} instead of {}", m, shown(method))};
  }
  return Rejection{501, fmt::format("method {} is not implemented", shown(method))};
}

std::optional<Rejection> check_transfer_encoding(std::string_view te) {
  if (te.empty() || iequals(trim(te), "chunked")) return std::nullopt;
  return Rejection{501, fmt::format("Transfer-Encoding \"{}\" is not supported; send the body "
                                    "with Content-Length or Transfer-Encoding: chunked",
                                    shown(trim(te)))};
}

bool expects_continue(std::string_view expect) { return iequals(trim(expect), "100-continue"); }

StatusOr<CorsPolicy> CorsPolicy::parse(const std::vector<std::string>& origins) {
  CorsPolicy p;
  for (const std::string& o : origins) {
    if (o == "*") {
      p.any_ = true;
      continue;
    }
    const std::string l = lower(o);
    const size_t scheme_end = l.find("://");
    const std::string_view scheme = std::string_view(l).substr(0, scheme_end);
    const bool ok_scheme = scheme_end != std::string::npos && (scheme == "http" || scheme == "https");
    const std::string_view rest =
        ok_scheme ? std::string_view(l).substr(scheme_end + 3) : std::string_view();
    const bool ok_rest = !rest.empty() && rest.find_first_of("/?#@ \t") == std::string_view::npos;
    if (!ok_scheme || !ok_rest)
      return Status::Errorf("--cors-origins: \"{}\" is not an origin; use \"*\" or "
                            "scheme://host[:port], e.g. http://localhost:3000", shown(o));
    p.origins_.push_back(l);
  }
  return p;
}

bool CorsPolicy::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  if (any_) return true;
  const std::string l = lower(origin);
  return std::find(origins_.begin(), origins_.end(), l) != origins_.end();
}

HttpHeaders CorsPolicy::headers(std::string_view origin, bool preflight,
                                std::string_view requested_headers) const {
  HttpHeaders h;
  if (!allows(origin)) return h;
  if (any_) {
    h.emplace_back("Access-Control-Allow-Origin", "*");
  } else {
    h.emplace_back("Access-Control-Allow-Origin", std::string(origin));
    h.emplace_back("Vary", "Origin");
  }
  if (preflight) {
    h.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
    const std::string_view req = trim(requested_headers);
    h.emplace_back("Access-Control-Allow-Headers",
                   plain_header_list(req) ? std::string(req)
                                          : std::string("Authorization, Content-Type"));
    h.emplace_back("Access-Control-Max-Age", "600");
  } else {
    h.emplace_back("Access-Control-Expose-Headers", "Retry-After");
  }
  return h;
}

std::string url_host(std::string_view address) {
  if (address.find(':') != std::string_view::npos && address.front() != '[')
    return fmt::format("[{}]", address);
  return std::string(address);
}

}  // namespace hinge::http

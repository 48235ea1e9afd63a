#include "route/backend_call.h"

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <limits>
#include <chrono>

namespace hinge::route {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

StatusOr<BackendAddress> BackendAddress::parse(const std::string& url) {
  auto bad = [&](const char* why) {
    return Status::Errorf("--backend '{}': {} (give http://HOST:PORT)", url, why);
  };
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return bad("not an http:// URL");
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("a path is not supported");
  BackendAddress a;
  a.url = std::string(kScheme) + std::string(rest);
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return bad("give [IPv6]:PORT");
    a.host = std::string(rest.substr(1, close - 1));
    port = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    a.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
  }
  int p = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
    return bad("bad port");
  if (a.host.empty()) return bad("no host");
  a.port = static_cast<uint16_t>(p);
  return a;
}

struct BackendCall::Impl {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  std::atomic<bool> aborted{false};
  char chunk[16384];

  // Runs the io_context until the pending operation completes.
  void run() {
    ioc.restart();
    ioc.run();
  }
  static std::chrono::steady_clock::duration secs(double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
  }
};

BackendCall::BackendCall() : impl_(std::make_unique<Impl>()) {}
BackendCall::~BackendCall() = default;

void BackendCall::abort() {
  impl_->aborted = true;
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
    impl->stream.socket().close(ec);
  });
}

Status BackendCall::send(const BackendAddress& to, const std::string& method,
                         const std::string& target, const http::HttpHeaders& headers,
                         const std::string& body, double connect_timeout_s) {
  Impl& m = *impl_;
  if (m.aborted) return Status::Error("aborted");
  beast::error_code ec;
  net::ip::tcp::resolver resolver(m.ioc);
  const auto endpoints = resolver.resolve(to.host, std::to_string(to.port), ec);
  if (ec) return Status::Errorf("{}: {}", to.url, ec.message());
  m.stream.expires_after(Impl::secs(connect_timeout_s));
  m.stream.async_connect(endpoints, [&](beast::error_code e, const auto&) { ec = e; });
  m.run();
  if (ec) return Status::Errorf("{}: connect: {}", to.url, ec.message());
  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.set(bhttp::field::host, to.host + ":" + std::to_string(to.port));
  req.body() = body;
  req.prepare_payload();
  m.stream.expires_after(Impl::secs(connect_timeout_s + 30));
  bhttp::async_write(m.stream, req, [&](beast::error_code e, size_t) { ec = e; });
  m.run();
  if (ec) return Status::Errorf("{}: send: {}", to.url, ec.message());
  return Status::Ok();
}

Status BackendCall::read_head(BackendHead* head, double timeout_s) {
  Impl& m = *impl_;
  m.parser.emplace();
  // Not boost::none: Boost 1.74 compares a length with an empty optional as "over the limit".
  m.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  m.stream.expires_after(Impl::secs(timeout_s));
  bhttp::async_read_header(m.stream, m.buffer, *m.parser, [&](beast::error_code e, size_t) { ec = e; });
  m.run();
  if (ec) return Status::Errorf("no response: {}", m.aborted ? "aborted" : ec.message());
  const auto& res = m.parser->get();
  head->status = static_cast<int>(res.result_int());
  head->content_type = std::string(res[bhttp::field::content_type]);
  head->headers.clear();
  for (const auto& f : res.base()) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "content-type" || name == "content-length" || name == "transfer-encoding" ||
        name == "connection" || name == "keep-alive" || name == "date" || name == "server")
      continue;
    head->headers.emplace_back(std::move(name), std::string(f.value()));
  }
  return Status::Ok();
}

StatusOr<bool> BackendCall::read_some(std::string* out, double idle_timeout_s) {
  Impl& m = *impl_;
  if (!m.parser) return Status::Error("no head read");
  if (m.parser->is_done()) return false;
  auto& body = m.parser->get().body();
  body.data = m.chunk;
  body.size = sizeof m.chunk;
  beast::error_code ec;
  m.stream.expires_after(Impl::secs(idle_timeout_s));
  bhttp::async_read_some(m.stream, m.buffer, *m.parser, [&](beast::error_code e, size_t) { ec = e; });
  m.run();
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return Status::Errorf("the replica failed mid-answer: {}", m.aborted ? "aborted" : ec.message());
  out->append(m.chunk, sizeof m.chunk - body.size);
  return !m.parser->is_done();
}

StatusOr<std::pair<int, std::string>> backend_fetch(const BackendAddress& to,
                                                    const std::string& method,
                                                    const std::string& target,
                                                    const http::HttpHeaders& headers,
                                                    const std::string& body, double timeout_s,
                                                    size_t max_body_bytes) {
  BackendCall call;
  HINGE_RETURN_IF_ERROR(call.send(to, method, target, headers, body, timeout_s));
  BackendHead head;
  HINGE_RETURN_IF_ERROR(call.read_head(&head, timeout_s));
  std::string out;
  for (;;) {
    auto more = call.read_some(&out, timeout_s);
    if (!more.ok()) return more.status();
    if (out.size() > max_body_bytes) return Status::Errorf("{}: answer too large", to.url);
    if (!*more) break;
  }
  return std::make_pair(head.status, std::move(out));
}

}  // namespace hinge::route

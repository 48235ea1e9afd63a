// A deliberately small blocking HTTP/1.1 client over POSIX sockets for server tests: it sends
// raw bytes (so tests can send malformed requests) and parses Content-Length or chunked
// responses. Not for production use.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hinge::testing {

struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // de-chunked
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

class HttpConn {
 public:
  explicit HttpConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~HttpConn() { close(); }
  HttpConn(const HttpConn&) = delete;
  HttpConn& operator=(const HttpConn&) = delete;

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_raw(std::string_view bytes) {
    while (!bytes.empty() && fd_ >= 0) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return fd_ >= 0;
  }
  bool send(std::string_view method, std::string_view target, std::string_view body = {},
            std::string_view extra_headers = {}) {
    std::string r = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n";
    r += extra_headers;
    if (!body.empty() || method == "POST")
      r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    r += "\r\n";
    r += body;
    return send_raw(r);
  }
  // Reads one whole response (timeout: nullopt).
  std::optional<HttpReply> read_reply(double timeout_s = 30) {
    HttpReply r;
    const auto deadline = after(timeout_s);
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return std::nullopt;
    const std::string head = buf_.substr(0, head_end);
    buf_.erase(0, head_end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      const std::string line = head.substr(pos, e - pos);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string k = line.substr(0, colon);
        for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers.emplace_back(k, line.substr(v));
      }
      pos = e + 2;
    }
    if (r.header("transfer-encoding") == "chunked") {
      for (;;) {
        size_t e;
        while ((e = buf_.find("\r\n")) == std::string::npos)
          if (!fill(deadline)) return std::nullopt;
        const size_t n = std::stoul(buf_.substr(0, e), nullptr, 16);
        while (buf_.size() < e + 2 + n + 2)
          if (!fill(deadline)) return std::nullopt;
        r.body += buf_.substr(e + 2, n);
        buf_.erase(0, e + 2 + n + 2);
        if (n == 0) break;
      }
    } else {
      const std::string cl = r.header("content-length");
      const size_t n = cl.empty() ? 0 : std::stoul(cl);
      while (buf_.size() < n)
        if (!fill(deadline)) return std::nullopt;
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
    }
    return r;
  }
  // Reads until `needle` appears in what arrived after the headers (raw, chunk framing kept).
  bool read_until(std::string_view needle, double timeout_s = 30) {
    const auto deadline = after(timeout_s);
    while (buf_.find(needle) == std::string::npos)
      if (!fill(deadline)) return false;
    return true;
  }
  // True when the server closed the connection (EOF) within the timeout.
  bool closed_by_server(double timeout_s = 5) {
    const auto deadline = after(timeout_s);
    while (fill(deadline)) {
    }
    return eof_;
  }

 private:
  static std::chrono::steady_clock::time_point after(double s) {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  }
  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (fd_ < 0 || eof_) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char tmp[16384];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool eof_ = false;
  std::string buf_;
};

// One request on a fresh connection.
inline std::optional<HttpReply> http_call(uint16_t port, std::string_view method,
                                          std::string_view target, std::string_view body = {},
                                          std::string_view extra_headers = {}) {
  HttpConn c(port);
  if (!c.ok()) return std::nullopt;
  c.send(method, target, body, extra_headers);  // a server may answer before taking it all
  return c.read_reply();
}

}  // namespace hinge::testing

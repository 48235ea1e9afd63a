// Status / StatusOr: the error tier for bad input and I/O failures.
// A Status carries a message a user can act on ("file.gguf: tensor 'x' extends past end of file").
// Bugs are HINGE_CHECK (abort with file:line); expected hot-path outcomes are plain return values.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace hinge {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  template <typename... Args>
  static Status Errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...));
  }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kOk = "OK";
    return message_ ? *message_ : kOk;
  }
  // Returns a copy with "context: " prepended to the message (no-op when OK).
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(context + ": " + *message_);
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

// A value or an error: the one result type, StatusOr<T> (error: Status) and the server's
// ApiResult<T> (error: server::ApiError, server/api_error.h).
template <typename T, typename E>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const E& error() const { return std::get<E>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 protected:
  std::variant<T, E> v_;
};

template <typename T>
class [[nodiscard]] StatusOr : public Result<T, Status> {
 public:
  StatusOr(T value) : Result<T, Status>(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : Result<T, Status>(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(this->v_).ok())
      this->v_ = Status::Error("internal: StatusOr built from OK status");
  }
  Status status() const { return this->ok() ? Status::Ok() : this->error(); }
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* expr,
                                      const std::string& msg) {
  std::fprintf(stderr, "hinge: internal check failed at %s:%d: %s %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}

}  // namespace hinge

// Always-on invariant check (bugs only, never for user input).
#define HINGE_CHECK(cond)                                                 \
  do {                                                                    \
    if (!(cond)) ::hinge::check_failed(__FILE__, __LINE__, #cond, "");   \
  } while (0)
#define HINGE_CHECK_MSG(cond, ...)                                                         \
  do {                                                                                     \
    if (!(cond)) ::hinge::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// Propagate a non-OK Status from an expression.
#define HINGE_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::hinge::Status _hinge_st = (expr);          \
    if (!_hinge_st.ok()) return _hinge_st;       \
  } while (0)

#define HINGE_CONCAT_INNER(a, b) a##b
#define HINGE_CONCAT(a, b) HINGE_CONCAT_INNER(a, b)
// HINGE_ASSIGN_OR_RETURN(auto x, expr): unwraps a StatusOr or returns its Status.
#define HINGE_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto HINGE_CONCAT(_hinge_so_, __LINE__) = (expr);                         \
  if (!HINGE_CONCAT(_hinge_so_, __LINE__).ok())                             \
    return HINGE_CONCAT(_hinge_so_, __LINE__).status();                     \
  lhs = std::move(HINGE_CONCAT(_hinge_so_, __LINE__)).value()

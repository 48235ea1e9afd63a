#include "grammar/regex.h"

#include <cctype>

#include <fmt/format.h>

namespace hinge::grammar {
namespace {

// A code point as it goes inside a GBNF class or literal.
std::string esc(uint32_t c) {
  switch (c) {
    case '\\': return "\\\\";
    case '"': return "\\\"";
    case ']': return "\\]";
    case '[': return "\\[";
    case '-': return "\\-";
    case '^': return "\\^";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (c < 0x20 || c == 0x7F) return fmt::format("\\x{:02X}", c);
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  return c <= 0xFFFF ? fmt::format("\\u{:04X}", c) : fmt::format("\\U{:08X}", c);
}

class RegexCompiler {
 public:
  explicit RegexCompiler(std::string_view s) : s_(s) {}

  StatusOr<std::string> run() {
    if (!s_.empty() && s_[0] == '^') ++i_;
    auto e = alternation();
    if (!e.ok()) return e.status();
    if (i_ < s_.size()) {
      if (s_[i_] == '$' && i_ + 1 == s_.size()) return "root ::= " + *e + "\n";
      return error(s_[i_] == ')' ? "an unmatched ')'" : "'$' only at the end");
    }
    return "root ::= " + *e + "\n";
  }

 private:
  Status error(const std::string& what) const {
    return Status::Errorf("guided_regex: {} at offset {} is not supported", what, i_);
  }

  StatusOr<std::string> alternation() {
    std::string out;
    while (true) {
      auto seq = sequence();
      if (!seq.ok()) return seq.status();
      out += (out.empty() ? "" : " | ") + *seq;
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        continue;
      }
      return "(" + out + ")";
    }
  }

  StatusOr<std::string> sequence() {
    std::string out;
    while (i_ < s_.size() && s_[i_] != '|' && s_[i_] != ')') {
      if (s_[i_] == '$' && i_ + 1 == s_.size()) break;
      auto atom = this->atom();
      if (!atom.ok()) return atom.status();
      auto q = quantifier();
      if (!q.ok()) return q.status();
      out += (out.empty() ? "" : " ") + *atom + *q;
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  StatusOr<std::string> quantifier() {
    if (i_ >= s_.size()) return std::string();
    std::string q;
    const char c = s_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      const size_t end = s_.find('}', i_);
      if (end == std::string_view::npos) return error("a '{' without '}'");
      const std::string_view body = s_.substr(i_ + 1, end - i_ - 1);
      for (char d : body)
        if (!(d >= '0' && d <= '9') && d != ',') return error("a '{' that is not {m}, {m,} or {m,n}");
      if (body.empty() || body[0] == ',') return error("a '{' that is not {m}, {m,} or {m,n}");
      q = "{" + std::string(body) + "}";
      i_ = end + 1;
    } else {
      return std::string();
    }
    if (i_ < s_.size() && s_[i_] == '?') ++i_;  // lazy: the same language
    if (i_ < s_.size() && (s_[i_] == '*' || s_[i_] == '+' || s_[i_] == '{')) return error("a repeated quantifier");
    return q;
  }

  // One code point of the source (UTF-8).
  uint32_t next_cp() {
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    uint32_t v = n == 1 ? c : (c & (0xFF >> (n + 1)));
    for (int k = 1; k < n && i_ + static_cast<size_t>(k) < s_.size(); ++k)
      v = (v << 6) | (static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]) & 0x3F);
    i_ += static_cast<size_t>(n);
    return v;
  }

  // A class escape's ranges (inside [...]), or "" if `c` is not one.
  static std::string class_escape(char c) {
    switch (c) {
      case 'd': return "0-9";
      case 'w': return "a-zA-Z0-9_";
      case 's': return " \\t\\n\\r\\x0B\\x0C";
      default: return "";
    }
  }

  StatusOr<uint32_t> escaped_cp() {  // after the backslash
    if (i_ >= s_.size()) return Status(error("a trailing '\\'"));
    const char c = s_[i_];
    auto hex = [&](int n) -> StatusOr<uint32_t> {
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (++i_ >= s_.size()) return Status(error("a short hex escape"));
        const char h = s_[i_];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
        else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
        else return Status(error("a bad hex escape"));
      }
      ++i_;
      return v;
    };
    switch (c) {
      case 'n': ++i_; return uint32_t{'\n'};
      case 't': ++i_; return uint32_t{'\t'};
      case 'r': ++i_; return uint32_t{'\r'};
      case 'f': ++i_; return uint32_t{'\f'};
      case 'v': ++i_; return uint32_t{'\v'};
      case 'x': return hex(2);
      case 'u': return hex(4);
      default: break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      return Status(error(fmt::format("the escape '\\{}'", c)));
    return next_cp();
  }

  StatusOr<std::string> atom() {
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < s_.size() && s_[i_] == '?') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') i_ += 2;
        else return error("a '(?' group other than (?:");
      }
      auto inner = alternation();
      if (!inner.ok()) return inner.status();
      if (i_ >= s_.size() || s_[i_] != ')') return error("a '(' without ')'");
      ++i_;
      return *inner;
    }
    if (c == '[') return klass();
    if (c == '.') {
      ++i_;
      return std::string("[^\\n]");
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return error(fmt::format("a '{}' with nothing to repeat", c));
    if (c == '^' || c == '$') return error(fmt::format("the anchor '{}'", c));
    if (c == '\\') {
      ++i_;
      if (i_ < s_.size()) {
        const char e = s_[i_];
        const std::string ranges = class_escape(static_cast<char>(std::tolower(static_cast<unsigned char>(e))));
        if (!ranges.empty()) {
          ++i_;
          return std::string(std::isupper(static_cast<unsigned char>(e)) ? "[^" : "[") + ranges + "]";
        }
        if (e == 'b' || e == 'B' || (e >= '1' && e <= '9') || e == 'k')
          return error(fmt::format("'\\{}' (word boundaries and backreferences)", e));
      }
      auto cp = escaped_cp();
      if (!cp.ok()) return cp.status();
      return "\"" + esc(*cp) + "\"";
    }
    return "\"" + esc(next_cp()) + "\"";
  }

  StatusOr<std::string> klass() {
    ++i_;  // '['
    std::string out = "[";
    if (i_ < s_.size() && s_[i_] == '^') {
      out += '^';
      ++i_;
    }
    bool first = true;
    while (i_ < s_.size() && (s_[i_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (s_[i_] == '\\') {
        ++i_;
        if (i_ < s_.size()) {
          const std::string ranges = class_escape(s_[i_]);
          if (!ranges.empty()) {
            out += ranges;
            ++i_;
            continue;
          }
          if (s_[i_] == 'D' || s_[i_] == 'W' || s_[i_] == 'S') return error("a negated class escape inside [...]");
        }
        auto cp = escaped_cp();
        if (!cp.ok()) return cp.status();
        lo = *cp;
      } else {
        lo = next_cp();
      }
      out += esc(lo);
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        if (s_[i_] == '\\') {
          ++i_;
          auto cp = escaped_cp();
          if (!cp.ok()) return cp.status();
          hi = *cp;
        } else {
          hi = next_cp();
        }
        if (hi < lo) return error("a range whose end is below its start");
        out += "-" + esc(hi);
      }
    }
    if (i_ >= s_.size()) return error("a '[' without ']'");
    ++i_;
    return out + "]";
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

StatusOr<std::string> regex_to_gbnf(std::string_view regex) {
  if (regex.size() > 16384) return Status::Error("guided_regex: longer than 16 KiB");
  return RegexCompiler(regex).run();
}

}  // namespace hinge::grammar

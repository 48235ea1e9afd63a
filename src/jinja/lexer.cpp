// Jinja lexer (see jinja/lexer.h), a transcription of jinja2.lexer's rules.
#include "jinja/lexer.h"

#include <cctype>

#include "jinja/value.h"

namespace hinge::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit(Tok::kData, src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : 0;
      std::string text = src_.substr(pos_, tag - pos_);
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_ws(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool all_ws = l_pos < text.size();
          for (size_t k = l_pos; k < text.size() && all_ws; ++k) all_ws = is_ws(text[k]);
          if (all_ws) text.resize(l_pos);
        }
      }
      if (!text.empty()) emit(Tok::kData, text, pos_);
      size_t body = tag + 2 + (sign == '-' || sign == '+');
      if (kind == '#') {
        line_starting = lex_comment(tag, body);
      } else if (kind == '%' && try_raw(tag, body, &line_starting)) {
        // raw block consumed
      } else {
        line_starting = lex_tag(tag, body, kind == '%');
      }
    }
    tokens_.push_back(Token{Tok::kEof, "", line_of(src_.size()), col_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t k = from; k + 1 < src_.size(); ++k) {
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) {
        return k;
      }
    }
    return std::string::npos;
  }

  int line_of(size_t p) {
    if (p < line_pos_) line_pos_ = line_start_ = 0, line_ = 1;
    while (line_pos_ < p && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') {
        ++line_;
        line_start_ = line_pos_ + 1;
      }
      ++line_pos_;
    }
    return line_;
  }
  int col_of(size_t p) {
    line_of(p);
    return static_cast<int>(p - line_start_) + 1;
  }

  [[noreturn]] void error_at(size_t p, const std::string& what) {
    int l = line_of(p);
    failf("line {}, column {}: {}", l, col_of(p), what);
  }

  void emit(Tok t, std::string text, size_t p) {
    int l = line_of(p);
    tokens_.push_back(Token{t, std::move(text), l, col_of(p)});
  }

  // Matches an end marker ("%}", "}}" or "#}") with its whitespace control at p; returns the
  // position after it (npos when none) and whether the consumed text ended with a newline.
  size_t match_end(size_t p, const char* marker, bool trim_newline, bool* nl) const {
    auto at = [&](size_t q, const char* m) { return src_.compare(q, 2, m) == 0; };
    if (p < src_.size() && src_[p] == '-' && at(p + 1, marker)) {
      size_t q = p + 3;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      *nl = q > p + 3 && src_[q - 1] == '\n';
      return q;
    }
    if (trim_newline && p < src_.size() && src_[p] == '+' && at(p + 1, marker)) {
      *nl = false;
      return p + 3;
    }
    if (at(p, marker)) {
      size_t q = p + 2;
      *nl = false;
      if (trim_newline && q < src_.size() && src_[q] == '\n') {
        ++q;
        *nl = true;
      }
      return q;
    }
    return std::string::npos;
  }

  bool lex_comment(size_t tag, size_t body) {
    bool nl = false;
    for (size_t p = body; p < src_.size(); ++p) {
      size_t end = match_end(p, "#}", true, &nl);
      if (end != std::string::npos) {
        pos_ = end;
        return nl;
      }
    }
    error_at(tag, "missing end of comment tag '#}'");
  }

  bool try_raw(size_t tag, size_t body, bool* line_starting) {
    size_t p = body;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && isalnum(src_[p + 3]))) {
      return false;
    }
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    bool nl = false;
    size_t start = match_end(p, "%}", false, &nl);
    if (start == std::string::npos) error_at(p, "expected '%}' after 'raw'");
    for (size_t k = start; k + 1 < src_.size(); ++k) {
      if (src_[k] != '{' || src_[k + 1] != '%') continue;
      size_t q = k + 2;
      char sign = q < src_.size() ? src_[q] : 0;
      if (sign == '-' || sign == '+') ++q;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      size_t end = match_end(q, "%}", true, &nl);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(start, k - start);
      if (sign == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      }
      if (!text.empty()) emit(Tok::kData, text, start);
      pos_ = end;
      *line_starting = nl;
      return true;
    }
    error_at(tag, "missing end of raw directive");
  }

  bool lex_tag(size_t tag, size_t p, bool block) {
    emit(block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", tag);
    std::vector<char> balance;
    const char* marker = block ? "%}" : "}}";
    while (true) {
      bool nl = false;
      if (balance.empty()) {
        size_t end = match_end(p, marker, block, &nl);
        if (end != std::string::npos) {
          emit(block ? Tok::kBlockEnd : Tok::kVarEnd, marker, p);
          pos_ = end;
          return nl;
        }
      }
      if (p >= src_.size()) {
        error_at(p, fmt::format("unexpected end of template, expected '{}'", marker));
      }
      char c = src_[p];
      if (is_ws(c)) {
        ++p;
      } else if (isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
      } else if (isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t q = p;
        while (q < src_.size() && (isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        emit(Tok::kName, src_.substr(p, q - p), p);
        p = q;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        p = lex_operator(p, balance);
      }
    }
  }

  size_t lex_number(size_t p) {
    size_t q = p;
    auto digits = [&] {
      size_t s = q;
      while (q < src_.size() && (isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q > s && q + 1 < src_.size() &&
                                  isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        ++q;
      }
      return q > s;
    };
    digits();
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      ++q;
      digits();
      is_float = true;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t save = q;
      ++q;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (digits()) {
        is_float = true;
      } else {
        q = save;
      }
    }
    std::string text;
    for (size_t k = p; k < q; ++k) {
      if (src_[k] != '_') text += src_[k];
    }
    emit(is_float ? Tok::kFloat : Tok::kInt, text, p);
    return q;
  }

  size_t lex_string(size_t p) {
    char quote = src_[p];
    std::string out;
    size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) error_at(p, "unterminated string literal");
      char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) error_at(p, "unterminated string literal");
      char e = src_[q + 1];
      q += 2;
      auto hex = [&](int n) {
        if (q + n > src_.size()) error_at(q, "truncated \\x/\\u escape");
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          char h = src_[q + k];
          if (!isxdigit(static_cast<unsigned char>(h))) error_at(q, "truncated \\x/\\u escape");
          v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        q += n;
        return v;
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': append_utf8(hex(2), out); break;
        case 'u': append_utf8(hex(4), out); break;
        case 'U': append_utf8(hex(8), out); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int k = 0; k < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k) {
              v = v * 8 + (src_[q++] - '0');
            }
            append_utf8(v, out);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    emit(Tok::kString, std::move(out), p);
    return q + 1;
  }

  size_t lex_operator(size_t p, std::vector<char>& balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        emit(Tok::kOp, op, p);
        return p + 2;
      }
    }
    char c = src_[p];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      error_at(p, fmt::format("unexpected character '{}'", c));
    }
    if (c == '{') balance.push_back('}');
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '}' || c == ')' || c == ']') {
      if (balance.empty()) error_at(p, fmt::format("unexpected '{}'", c));
      if (balance.back() != c) {
        error_at(p, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      }
      balance.pop_back();
    }
    emit(Tok::kOp, std::string(1, c), p);
    return p + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  size_t line_pos_ = 0, line_start_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(normalize(source)).run(); }

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kData: return "template data";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kName: return "'" + t.text + "'";
    case Tok::kString: return "string literal";
    case Tok::kInt:
    case Tok::kFloat: return "number " + t.text;
    case Tok::kOp: return "'" + t.text + "'";
    case Tok::kEof: return "end of template";
  }
  return "?";
}

}  // namespace hinge::jinja

// Value semantics for the Jinja interpreter (see jinja/value.h): Python str/repr/equality.
#include "jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace hinge::jinja {

void fail(std::string message) { throw Error{std::move(message)}; }

Value Value::Undefined(std::string hint) {
  Value v;
  v.s = std::move(hint);
  return v;
}
Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::Int(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::Float(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::Str(std::string x, bool markup) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  v.markup = markup;
  return v;
}
Value Value::MakeList(List items, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<List>(std::move(items));
  v.tuple = tuple;
  return v;
}
Value Value::MakeDict() {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>();
  return v;
}
Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind = Kind::kCallable;
  v.fn = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::kInt: return static_cast<double>(i);
    case Kind::kFloat: return f;
    case Kind::kBool: return b ? 1 : 0;
    default: return 0;
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return generator || !list->empty();
    case Kind::kDict: return object || !dict->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return markup ? "Markup" : "str";
    case Kind::kList: return generator ? "generator" : tuple ? "tuple" : "list";
    case Kind::kDict: return object ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.kind == Kind::kString && k.s == key) return &v;
  }
  return nullptr;
}
void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (values_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(size_t pos, std::string_view name) const {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return pos < args.size() ? &args[pos] : nullptr;
}
void CallArgs::check(std::string_view fn, size_t max_pos,
                     std::initializer_list<std::string_view> names) const {
  if (args.size() > max_pos) failf("{}() takes at most {} positional argument(s)", fn, max_pos);
  for (const auto& [k, v] : kwargs) {
    bool known = false;
    for (auto n : names) known = known || n == k;
    if (!known) failf("{}() got an unexpected keyword argument '{}'", fn, k);
  }
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::kFloat && b.kind != Kind::kFloat) {
      int64_t x = a.kind == Kind::kBool ? a.b : a.i, y = b.kind == Kind::kBool ? b.b : b.i;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.s == b.s;
    case Kind::kList: {
      if (a.tuple != b.tuple || a.generator || b.generator) return a.list == b.list;
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!values_equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.object || b.object) return a.dict == b.dict;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Kind::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // [-]d[.ddd]e[+-]xx
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (size_t k = 0; k < epos; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int n = static_cast<int>(digits.size());
  int decpt = exp + 1;
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(decpt - n, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

static uint32_t decode_cp(std::string_view c) {
  auto u = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(c[k])); };
  if (c.size() == 1) return u(0);
  if (c.size() == 2) return ((u(0) & 0x1f) << 6) | (u(1) & 0x3f);
  if (c.size() == 3) return ((u(0) & 0x0f) << 12) | ((u(1) & 0x3f) << 6) | (u(2) & 0x3f);
  return ((u(0) & 0x07) << 18) | ((u(1) & 0x3f) << 12) | ((u(2) & 0x3f) << 6) | (u(3) & 0x3f);
}

static bool py_printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp >= 0x80 && cp <= 0xa0) return false;
  if (cp == 0xad || cp == 0x1680 || cp == 0x180e || cp == 0x3000 || cp == 0xfeff) return false;
  if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f)) return false;
  if ((cp >= 0x205f && cp <= 0x206f) || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  return true;
}

std::string py_string_repr(std::string_view s) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  std::string out(1, quote);
  for (std::string_view c : utf8_chars(s)) {
    uint32_t cp = decode_cp(c);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += c;
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (py_printable(cp)) {
      out += c;
    } else if (cp < 0x100) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out += fmt::format("\\U{:08x}", cp);
    }
  }
  out += quote;
  return out;
}

static void append_str(const Value& v, bool as_repr, std::string& out, int depth = 0) {
  if (depth > kMaxValueDepth) fail("maximum value nesting depth exceeded");
  switch (v.kind) {
    case Kind::kUndefined: out += as_repr ? "Undefined" : ""; break;
    case Kind::kNone: out += "None"; break;
    case Kind::kBool: out += v.b ? "True" : "False"; break;
    case Kind::kInt: out += std::to_string(v.i); break;
    case Kind::kFloat: out += float_repr(v.f); break;
    case Kind::kString:
      if (!as_repr) {
        out += v.s;
      } else {
        out += v.markup ? "Markup(" + py_string_repr(v.s) + ")" : py_string_repr(v.s);
      }
      break;
    case Kind::kList: {
      if (v.generator) {
        out += "<generator object>";
        break;
      }
      out += v.tuple ? '(' : '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        append_str((*v.list)[k], true, out, depth + 1);
      }
      if (v.tuple && v.list->size() == 1) out += ',';
      out += v.tuple ? ')' : ']';
      break;
    }
    case Kind::kDict: {
      out += v.object ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        append_str(k, true, out, depth + 1);
        out += ": ";
        append_str(x, true, out, depth + 1);
      }
      out += v.object ? "}>" : "}";
      break;
    }
    case Kind::kCallable: out += "<function " + v.fn->name + ">"; break;
  }
}

std::string to_str(const Value& v) {
  if (v.kind == Kind::kString) return v.s;
  std::string out;
  append_str(v, false, out);
  return out;
}
std::string repr(const Value& v) {
  std::string out;
  append_str(v, true, out);
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t k = 0;
  while (k < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (k + n > s.size()) n = s.size() - k;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string py_strip(std::string_view s, int sides, const std::string* chars) {
  auto chars_v = utf8_chars(s);
  std::vector<std::string_view> strip_set;
  if (chars) strip_set = utf8_chars(*chars);
  auto strippable = [&](std::string_view c) {
    if (!chars) return is_py_space(decode_cp(c));
    for (auto x : strip_set) {
      if (x == c) return true;
    }
    return false;
  };
  size_t b = 0, e = chars_v.size();
  if (sides & 1) {
    while (b < e && strippable(chars_v[b])) ++b;
  }
  if (sides & 2) {
    while (e > b && strippable(chars_v[e - 1])) --e;
  }
  if (b == e) return {};
  const char* start = chars_v[b].data();
  const char* end = chars_v[e - 1].data() + chars_v[e - 1].size();
  return std::string(start, end);
}

}  // namespace hinge::jinja

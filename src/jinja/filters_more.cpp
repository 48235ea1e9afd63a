// The less common Jinja filters: int, float, round, abs, sum, min, max, sort, dictsort, reverse,
// batch, format, pprint, wordcount, center (see jinja/interpreter.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "jinja/filters_util.h"

namespace hinge::jinja {
namespace {

bool parse_py_int(const std::string& text, int64_t* out) {
  std::string s = py_strip(text, 3);
  std::string digits;
  size_t k = 0;
  bool neg = false;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) neg = s[k++] == '-';
  for (; k < s.size(); ++k) {
    if (std::isdigit(static_cast<unsigned char>(s[k]))) {
      digits += s[k];
    } else if (s[k] == '_' && !digits.empty() && k + 1 < s.size() &&
               std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
      continue;
    } else {
      return false;
    }
  }
  if (digits.empty()) return false;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = neg ? -v : v;
  return true;
}

bool parse_py_float(const std::string& text, double* out) {
  std::string s = py_strip(text, 3);
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

// Sort key comparison for sort/dictsort/min/max (case-insensitive strings by default).
bool less_than(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return ascii_lower(a.s) < ascii_lower(b.s);
  }
  return compare_op("<", a, b);
}

}  // namespace

int64_t py_len(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(utf8_length(v.s));
    case Kind::kList:
      if (v.generator) break;
      return static_cast<int64_t>(v.list->size());
    case Kind::kDict:
      if (v.object) break;
      return static_cast<int64_t>(v.dict->items.size());
    default: break;
  }
  failf("object of type '{}' has no len()", v.type_name());
}

std::string percent_format(const std::string& fmt, const List& args) {
  std::string out;
  size_t next = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail("incomplete format");
    char c = fmt[k];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) fail("not enough arguments for format string");
    const Value& v = args[next++];
    if (c == 's') {
      out += to_str(v);
    } else if (c == 'r') {
      out += repr(v);
    } else if ((c == 'd' || c == 'i') && v.is_number()) {
      out += std::to_string(v.kind == Kind::kFloat ? static_cast<int64_t>(v.f)
                                                    : v.kind == Kind::kBool ? v.b : v.i);
    } else if (c == 'f' && v.is_number()) {
      out += fmt::format("{:.6f}", v.as_double());
    } else {
      failf("unsupported format character '{}'", c);
    }
  }
  if (next < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value apply_filter_more(Interpreter& in, const std::string& name, const Value& input,
                        CallArgs& args) {
  if (name == "int") {
    int64_t def = arg_int(args.get(0, "default"), 0, "int");
    int64_t iv = 0;
    double fv = 0;
    if (input.kind == Kind::kInt) return input;
    if (input.kind == Kind::kBool) return Value::Int(input.b);
    if (input.kind == Kind::kFloat) {
      if (!std::isfinite(input.f) || std::fabs(input.f) >= 9.2e18) return Value::Int(def);
      return Value::Int(static_cast<int64_t>(input.f));
    }
    if (input.is_string()) {
      if (parse_py_int(input.s, &iv)) return Value::Int(iv);
      if (parse_py_float(input.s, &fv) && std::isfinite(fv) && std::fabs(fv) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(fv));
      }
    }
    return Value::Int(def);
  }
  if (name == "float") {
    const Value* d = args.get(0, "default");
    double def = d && d->is_number() ? d->as_double() : 0.0;
    double fv = 0;
    if (input.is_number()) return Value::Float(input.as_double());
    if (input.is_string() && parse_py_float(input.s, &fv)) return Value::Float(fv);
    return Value::Float(def);
  }
  if (name == "abs") {
    if (input.kind == Kind::kFloat) return Value::Float(std::fabs(input.f));
    if (input.kind == Kind::kInt && input.i != INT64_MIN) return Value::Int(std::llabs(input.i));
    if (input.kind == Kind::kBool) return Value::Int(input.b);
    failf("bad operand type for abs(): '{}'", input.type_name());
  }
  if (name == "round") {
    int64_t precision = arg_int(args.get(0, "precision"), 0, "round");
    const Value* m = args.get(1, "method");
    std::string method = m ? to_str(*m) : "common";
    if (!input.is_number()) failf("round: expected a number, got {}", input.type_name());
    double x = input.as_double();
    if (method == "common") {
      if (precision == 0) return Value::Float(std::nearbyint(x));
      std::string s = fmt::format("{:.{}f}", x, std::clamp<int64_t>(precision, 0, 300));
      return Value::Float(std::strtod(s.c_str(), nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(precision));
    if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
    if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
    fail("round: method must be 'common', 'ceil' or 'floor'");
  }
  if (name == "sum") {
    const Value* attribute = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    Value total = start ? *start : Value::Int(0);
    for (const Value& item : iterate(input)) {
      total = binary_op(in, "+", total,
                        attribute ? attr_path(in, item, to_str(*attribute)) : item);
    }
    return total;
  }
  if (name == "min" || name == "max") {
    bool cs = arg_bool(args.get(0, "case_sensitive"), false);
    const Value* attribute = args.get(1, "attribute");
    List items = iterate(input);
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t k = 1; k < items.size(); ++k) {
      Value a = attribute ? attr_path(in, items[k], to_str(*attribute)) : items[k];
      Value b = attribute ? attr_path(in, items[best], to_str(*attribute)) : items[best];
      if (name == "min" ? less_than(a, b, cs) : less_than(b, a, cs)) best = k;
    }
    return items[best];
  }
  if (name == "sort" || name == "dictsort") {
    bool dict = name == "dictsort";
    bool reverse = arg_bool(args.get(dict ? 2 : 0, "reverse"), false);
    bool cs = arg_bool(args.get(dict ? 0 : 1, "case_sensitive"), false);
    const Value* attribute = dict ? nullptr : args.get(2, "attribute");
    const Value* by = dict ? args.get(1, "by") : nullptr;
    bool by_value = by && to_str(*by) == "value";
    List items;
    if (dict) {
      if (!input.is_dict()) fail("dictsort: expected a mapping");
      for (const auto& [k, v] : input.dict->items) items.push_back(Value::MakeList({k, v}, true));
    } else {
      items = iterate(input);
    }
    auto key = [&](const Value& v) {
      if (dict) return (*v.list)[by_value ? 1 : 0];
      return attribute ? attr_path(in, v, to_str(*attribute)) : v;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? less_than(key(b), key(a), cs) : less_than(key(a), key(b), cs);
    });
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      auto chars = utf8_chars(input.s);
      std::string s;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) s += *it;
      return Value::Str(std::move(s));
    }
    List items = iterate(input);
    std::reverse(items.begin(), items.end());
    Value v = Value::MakeList(std::move(items));
    v.generator = true;
    return v;
  }
  if (name == "batch") {
    int64_t n = arg_int(args.get(0, "linecount"), 0, "batch");
    if (n <= 0) fail("batch: linecount must be positive");
    const Value* fill = args.get(1, "fill_with");
    List out, cur;
    for (const Value& item : iterate(input)) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::MakeList(std::move(cur)));
      if (cur.size() == static_cast<size_t>(n)) cur.clear();
    }
    if (!cur.empty()) {
      if (fill && !fill->is_none()) {
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
      }
      out.push_back(Value::MakeList(std::move(cur)));
    }
    Value v = Value::MakeList(std::move(out));
    v.generator = true;
    return v;
  }
  if (name == "format") return Value::Str(percent_format(to_str(input), args.args));
  if (name == "pprint") return Value::Str(repr(input));
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char c : to_str(input)) {
      bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  if (name == "center") {
    int64_t width = arg_int(args.get(0, "width"), 80, "center");
    std::string s = to_str(input);
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value::Str(s);
    width = std::min<int64_t>(width, static_cast<int64_t>(in.limits().max_output_bytes));
    int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value::Str(std::string(left, ' ') + s + std::string(total - left, ' '));
  }
  failf("no filter named '{}'", name);
}

}  // namespace hinge::jinja

// Jinja globals (range, namespace, dict, raise_exception, strftime_now) and the Python methods
// of str / dict / list that templates call (see jinja/interpreter.h). Mutating methods exist
// but fail when called, as in jinja2's ImmutableSandboxedEnvironment.
#include <ctime>

#include "jinja/filters_util.h"

namespace hinge::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value range_fn(CallArgs& a) {
  a.check("range", 3, {});
  auto int_arg = [&](size_t k) {
    const Value& v = a.args[k];
    if (v.kind == Kind::kBool) return static_cast<int64_t>(v.b);
    if (v.kind != Kind::kInt) failf("range(): '{}' object cannot be interpreted as an integer",
                                    v.type_name());
    return v.i;
  };
  if (a.args.empty()) fail("range expected at least 1 argument, got 0");
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = int_arg(0);
  } else {
    start = int_arg(0);
    stop = int_arg(1);
    if (a.args.size() == 3) step = int_arg(2);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                       static_cast<double>(step));
  if (n > static_cast<double>(kMaxRange)) {
    failf("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  }
  List items;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) items.push_back(Value::Int(k));
  return Value::MakeList(std::move(items));
}

Value dict_from_args(CallArgs& a, bool object) {
  Value d = Value::MakeDict();
  d.object = object;
  if (a.args.size() > 1) fail("expected at most 1 positional argument");
  if (!a.args.empty()) {
    const Value& init = a.args[0];
    if (init.is_dict()) {
      for (const auto& [k, v] : init.dict->items) d.dict->set(k, v);
    } else {
      for (const Value& pair : iterate(init)) {
        List kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
        d.dict->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.dict->set(Value::Str(k), v);
  return d;
}

Value strftime_now(CallArgs& a) {
  if (a.args.size() != 1 || !a.args[0].is_string()) fail("strftime_now(format) needs a string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, a.args[0].s.c_str(), &tm);
  return Value::Str(std::string(buf, n));
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none()) {
    size_t k = 0;
    while (true) {
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
      if (k >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(py_strip(s.substr(k), 2));
        break;
      }
      size_t e = k;
      while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
      out.push_back(s.substr(k, e - k));
      k = e;
    }
    return out;
  }
  std::string d = to_str(*sep);
  if (d.empty()) fail("empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) failf("expected str or tuple of str, got {}", v.type_name());
    if (v.s.size() > s.size()) return false;
    return prefix ? s.compare(0, v.s.size(), v.s) == 0
                  : s.compare(s.size() - v.s.size(), v.s.size(), v.s) == 0;
  };
  if (affix.is_list() && affix.tuple) {
    for (const auto& v : *affix.list) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

std::string str_format(const std::string& f, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    char c = f[k];
    if ((c == '{' || c == '}') && k + 1 < f.size() && f[k + 1] == c) {
      out += c;
      ++k;
    } else if (c == '{') {
      size_t e = f.find('}', k);
      if (e == std::string::npos) fail("Single '{' encountered in format string");
      std::string field = f.substr(k + 1, e - k - 1);
      if (field.find_first_of(":!.[") != std::string::npos) fail("format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_idx < a.args.size() ? &a.args[auto_idx] : nullptr;
        ++auto_idx;
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        size_t idx = std::strtoul(field.c_str(), nullptr, 10);
        v = idx < a.args.size() ? &a.args[idx] : nullptr;
      } else {
        v = a.get(SIZE_MAX, field);
      }
      if (!v) failf("format: missing argument '{}'", field);
      out += to_str(*v);
      k = e;
    } else if (c == '}') {
      fail("Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    bool alpha = std::isalpha(u);
    if (alpha) c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
    prev_cased = alpha;
  }
  return out;
}

Value string_method(Interpreter& in, const std::string& s, const std::string& m, CallArgs& a) {
  auto chars_arg = [&](size_t k, std::string* buf) -> const std::string* {
    const Value* v = a.get(k, "chars");
    if (!v || v->is_none()) return nullptr;
    *buf = to_str(*v);
    return buf;
  };
  std::string buf;
  if (m == "strip") return Value::Str(py_strip(s, 3, chars_arg(0, &buf)));
  if (m == "lstrip") return Value::Str(py_strip(s, 1, chars_arg(0, &buf)));
  if (m == "rstrip") return Value::Str(py_strip(s, 2, chars_arg(0, &buf)));
  if (m == "upper") return Value::Str(ascii_upper(s));
  if (m == "lower") return Value::Str(ascii_lower(s));
  if (m == "title") return Value::Str(py_title(s));
  if (m == "capitalize") return Value::Str(py_capitalize(s));
  if (m == "split" || m == "rsplit") {
    int64_t maxsplit = arg_int(a.get(1, "maxsplit"), -1, "split");
    if (m == "rsplit" && maxsplit >= 0) fail("rsplit with maxsplit is not supported");
    List out;
    for (auto& part : py_split(s, a.get(0, "sep"), maxsplit)) out.push_back(Value::Str(part));
    return Value::MakeList(std::move(out));
  }
  if (m == "splitlines") {
    List out;
    size_t start = 0;
    for (size_t k = 0; k <= s.size(); ++k) {
      if (k == s.size() || s[k] == '\n') {
        if (k < s.size() || start < s.size()) out.push_back(Value::Str(s.substr(start, k - start)));
        start = k + 1;
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (m == "startswith" || m == "endswith") {
    if (a.args.empty()) failf("{}() takes at least 1 argument", m);
    return Value::Bool(affix_match(s, a.args[0], m == "startswith"));
  }
  if (m == "replace") {
    if (a.args.size() < 2) fail("replace() needs 'old' and 'new'");
    std::string r = py_replace(s, to_str(a.args[0]), to_str(a.args[1]),
                               arg_int(a.get(2, "count"), -1, "replace"));
    in.check_size(r.size());
    return Value::Str(std::move(r));
  }
  if (m == "find" || m == "rfind" || m == "count" || m == "index") {
    if (a.args.empty() || !a.args[0].is_string()) failf("{}() needs a string", m);
    const std::string& sub = a.args[0].s;
    if (m == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t p = m == "rfind" ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (m == "index") fail("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(utf8_length(s.substr(0, p))));
  }
  if (m == "join") {
    if (a.args.empty()) fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(a.args[0])) {
      if (!v.is_string()) failf("sequence item: expected str instance, {} found", v.type_name());
      if (!first) out += s;
      first = false;
      out += v.s;
      in.check_size(out.size());
    }
    return Value::Str(std::move(out));
  }
  if (m == "format") return Value::Str(str_format(s, a));
  auto all = [&](auto pred) {
    if (s.empty()) return Value::Bool(false);
    for (char c : s) {
      if (!pred(static_cast<unsigned char>(c))) return Value::Bool(false);
    }
    return Value::Bool(true);
  };
  if (m == "isdigit") return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (m == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (m == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (m == "isspace") return all([](unsigned char c) { return std::isspace(c) != 0; });
  if (m == "islower") return Value::Bool(ascii_lower(s) == s && ascii_upper(s) != s);
  if (m == "isupper") return Value::Bool(ascii_upper(s) == s && ascii_lower(s) != s);
  failf("'str' object has no attribute '{}'", m);
}

bool is_string_method(const std::string& m) {
  static const char* kNames[] = {"strip", "lstrip", "rstrip", "upper", "lower", "title",
                                 "capitalize", "split", "rsplit", "splitlines", "startswith",
                                 "endswith", "replace", "find", "rfind", "count", "index", "join",
                                 "format", "isdigit", "isalpha", "isalnum", "isspace", "islower",
                                 "isupper"};
  for (const char* n : kNames) {
    if (m == n) return true;
  }
  return false;
}

Value unsafe(const std::string& type, const std::string& m) {
  return Value::Function(m, [type, m](CallArgs&) -> Value {
    failf("access to attribute '{}' of '{}' object is unsafe", m, type);
  });
}

}  // namespace

Value make_namespace(CallArgs& args) { return dict_from_args(args, true); }

void add_globals(Value& g) {
  g.dict->set(Value::Str("range"), Value::Function("range", range_fn));
  g.dict->set(Value::Str("namespace"), Value::Function("namespace", [](CallArgs& a) {
                return dict_from_args(a, true);
              }));
  g.dict->set(Value::Str("dict"),
              Value::Function("dict", [](CallArgs& a) { return dict_from_args(a, false); }));
  g.dict->set(Value::Str("raise_exception"), Value::Function("raise_exception", [](CallArgs& a) -> Value {
                fail(a.args.empty() ? std::string() : to_str(a.args[0]));
              }));
  g.dict->set(Value::Str("strftime_now"), Value::Function("strftime_now", strftime_now));
}

Value bound_method(Interpreter& in, const Value& obj, const std::string& name) {
  Interpreter* ip = &in;
  if (obj.is_string()) {
    if (!is_string_method(name)) return Value::Undefined();
    std::string s = obj.s;
    return Value::Function(name, [ip, s, name](CallArgs& a) {
      return string_method(*ip, s, name, a);
    });
  }
  if (obj.is_dict() && !obj.object) {
    auto d = obj.dict;
    if (name == "get") {
      return Value::Function(name, [d](CallArgs& a) {
        if (a.args.empty()) fail("get expected at least 1 argument");
        const Value* v = d->find(a.args[0]);
        return v ? *v : a.args.size() > 1 ? a.args[1] : Value::None();
      });
    }
    if (name == "items" || name == "keys" || name == "values") {
      return Value::Function(name, [d, name](CallArgs&) {
        List out;
        for (const auto& [k, v] : d->items) {
          out.push_back(name == "items" ? Value::MakeList({k, v}, true) : name == "keys" ? k : v);
        }
        return Value::MakeList(std::move(out));
      });
    }
    if (name == "copy") {
      return Value::Function(name, [d](CallArgs&) {
        Value c = Value::MakeDict();
        *c.dict = *d;
        return c;
      });
    }
    if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" ||
        name == "clear" || name == "fromkeys") {
      return unsafe("dict", name);
    }
    return Value::Undefined();
  }
  if (obj.is_list() && !obj.generator) {
    if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
        name == "remove" || name == "reverse" || name == "sort" || name == "clear") {
      return unsafe(obj.type_name(), name);
    }
  }
  return Value::Undefined();
}

}  // namespace hinge::jinja

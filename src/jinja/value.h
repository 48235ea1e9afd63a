// Dynamic values of the Jinja interpreter (jinja/interpreter.h), with Python semantics where the
// chat templates can observe them: str() / repr() of every type, equality (1 == 1.0 == True,
// list != tuple), truthiness, JSON conversion in both directions (tojson is Python's json.dumps).
//
// Kinds: undefined (jinja2's default Undefined: prints "", iterates as empty, fails on arithmetic,
// attribute and item access), none, bool, int (int64), float, string (UTF-8, optionally marked
// "markup" = markupsafe.Markup), list (optionally a tuple or a "generator", the lazy result of
// map/select/items, which has no len() and does not serialize), dict (insertion-ordered; an
// "object" dict is a namespace() or a loop, whose attributes are its keys), callable.
// Lists and dicts are shared by reference, like Python objects; the interpreter never mutates a
// list or dict reachable from the context (templates run in an immutable sandbox), only
// namespace objects.
//
// Errors inside the interpreter are thrown as jinja::Error and turned into Status by
// ChatTemplate; nothing throws past chat_template.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hinge::jinja {

// Deepest nesting of lists/dicts that str(), repr() and tojson walk (a namespace can hold itself).
inline constexpr int kMaxValueDepth = 256;

struct Error {
  std::string message;
};
[[noreturn]] void fail(std::string message);
template <typename... Args>
[[noreturn]] void failf(fmt::format_string<Args...> f, Args&&... args) {
  fail(fmt::format(f, std::forward<Args>(args)...));
}

enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

struct Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
using NativeFn = std::function<Value(CallArgs&)>;
struct Callable {
  std::string name;
  NativeFn fn;
};

struct Value {
  Kind kind = Kind::kUndefined;
  bool markup = false;     // string: a markupsafe.Markup
  bool tuple = false;      // list: a tuple
  bool generator = false;  // list: a generator (no len, no index, not JSON)
  bool object = false;     // dict: namespace / loop (attribute access = key lookup)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // string value; for undefined, the missing name (for error messages)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Callable> fn;

  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Float(double v);
  static Value Str(std::string v, bool markup = false);
  static Value MakeList(List items = {}, bool tuple = false);
  static Value MakeDict();
  static Value Function(std::string name, NativeFn fn);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  double as_double() const;  // int / float / bool
  bool truthy() const;
  std::string type_name() const;  // Python's name: str, int, list, dict, NoneType, ...
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // Argument `name` at `pos` (keyword first); nullptr when absent.
  const Value* get(size_t pos, std::string_view name) const;
  // Fails when there are more positional arguments than `max_pos` or an unknown keyword.
  void check(std::string_view fn, size_t max_pos, std::initializer_list<std::string_view> names) const;
};

bool values_equal(const Value& a, const Value& b);
std::string to_str(const Value& v);  // Python str()
std::string repr(const Value& v);    // Python repr()
std::string float_repr(double d);    // Python repr(float)
std::string py_string_repr(std::string_view s);
std::string html_escape(std::string_view s);  // markupsafe.escape

// UTF-8 helpers (strings are indexed and measured in code points, as Python does).
std::vector<std::string_view> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);
bool is_py_space(uint32_t cp);
std::string py_strip(std::string_view s, int sides /*1 left, 2 right, 3 both*/,
                     const std::string* chars = nullptr);

Value from_json(const nlohmann::ordered_json& j);
// Python json.dumps(v, ensure_ascii=False, indent=indent (<0: None), separators, sort_keys).
std::string to_json(const Value& v, int indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys);

}  // namespace hinge::jinja

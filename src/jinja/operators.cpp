// Jinja operators with Python semantics (see jinja/interpreter.h): arithmetic on int/float/bool
// (int64 with overflow errors), str and list concatenation and repetition, Markup escaping of
// the other operand of '+', '~' concatenation, comparisons and 'in'.
#include <cmath>

#include "jinja/interpreter.h"

namespace hinge::jinja {
namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  fail(v.s.empty() ? std::string("value is undefined") : v.s);
}

int64_t int_of(const Value& v) { return v.kind == Kind::kBool ? v.b : v.i; }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string() && !b.is_string()) {
    failf("can only concatenate str (not \"{}\") to str", b.type_name());
  }
  if (op == "+" && a.is_list() && !a.generator && b.is_list() && !b.generator) {
    failf("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(),
          a.type_name());
  }
  failf("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

Value repeat(const Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::Str("", seq.markup) : Value::MakeList({}, seq.tuple);
  size_t unit = seq.is_string() ? seq.s.size() : seq.list->size();
  if (unit != 0 && static_cast<uint64_t>(n) > in.limits().max_output_bytes / unit) {
    in.check_size(SIZE_MAX);
  }
  if (seq.is_string()) {
    std::string s;
    s.reserve(unit * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) s += seq.s;
    return Value::Str(std::move(s), seq.markup);
  }
  List items;
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq.list->begin(), seq.list->end());
  return Value::MakeList(std::move(items), seq.tuple);
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(const Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    in.check_size(s.size());
    return Value::Str(std::move(s));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    bool ints = a.kind != Kind::kFloat && b.kind != Kind::kFloat;
    if (ints && op != "/") {
      int64_t x = int_of(a), y = int_of(b), r = 0;
      if (op == "+") {
        if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
      } else if (op == "-") {
        if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
      } else if (op == "*") {
        if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
      } else if (op == "//" || op == "%") {
        if (y == 0) fail("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) fail("integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        r = op == "//" ? q : m;
      } else if (op == "**") {
        if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        r = 1;
        for (int64_t k = 0; k < y; ++k) {
          if (__builtin_mul_overflow(r, x, &r)) fail("integer overflow");
          if (r == 0 || r == 1) break;
          if (r == -1) {
            r = (y - k - 1) % 2 == 0 ? -1 : 1;
            break;
          }
        }
      } else {
        unsupported(op, a, b);
      }
      return Value::Int(r);
    }
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "/") {
      if (y == 0) fail("division by zero");
      return Value::Float(x / y);
    }
    if (op == "//") {
      if (y == 0) fail("float floor division by zero");
      return Value::Float(std::floor(x / y));
    }
    if (op == "%") {
      if (y == 0) fail("float modulo");
      return Value::Float(py_fmod(x, y));
    }
    if (op == "**") return Value::Float(std::pow(x, y));
    unsupported(op, a, b);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      std::string s;
      bool markup = a.markup || b.markup;
      s = (a.markup || !markup ? a.s : html_escape(a.s)) + (b.markup || !markup ? b.s : html_escape(b.s));
      in.check_size(s.size());
      return Value::Str(std::move(s), markup);
    }
    if (a.is_list() && b.is_list() && !a.generator && !b.generator && a.tuple == b.tuple) {
      in.check_size(a.list->size() + b.list->size());
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::MakeList(std::move(items), a.tuple);
    }
  }
  if (op == "*") {
    bool a_seq = a.is_string() || (a.is_list() && !a.generator);
    bool b_seq = b.is_string() || (b.is_list() && !b.generator);
    bool a_int = a.kind == Kind::kInt || a.kind == Kind::kBool;
    bool b_int = b.kind == Kind::kInt || b.kind == Kind::kBool;
    if (a_seq && b_int) return repeat(in, a, int_of(b));
    if (b_seq && a_int) return repeat(in, b, int_of(a));
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (item.is_undefined()) fail_undefined(item);
      if (!item.is_string()) {
        failf("'in <string>' requires string as left operand, not {}", item.type_name());
      }
      return container.s.find(item.s) != std::string::npos;
    case Kind::kList:
      for (const auto& x : *container.list) {
        if (values_equal(x, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (container.object) break;
      return container.dict->find(item) != nullptr;
    default: break;
  }
  failf("argument of type '{}' is not iterable", container.type_name());
}

static int three_way(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::kFloat && b.kind != Kind::kFloat) {
      return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b) ? 1 : 0;
    }
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
  if (a.is_list() && b.is_list() && a.tuple == b.tuple && !a.generator && !b.generator) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (!values_equal((*a.list)[k], (*b.list)[k])) {
        return three_way(op, (*a.list)[k], (*b.list)[k]);
      }
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  failf("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(),
        b.type_name());
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  int c = three_way(op, a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

}  // namespace hinge::jinja

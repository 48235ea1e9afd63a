// Jinja tests (`x is name(args)`), as jinja2.tests defines them (see jinja/interpreter.h).
#include <cmath>

#include "jinja/filters_util.h"

namespace hinge::jinja {

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  (void)in;
  auto arg = [&](size_t k) -> const Value& {
    if (k >= args.args.size()) failf("test '{}' needs an argument", name);
    return args.args[k];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "integer") return v.kind == Kind::kInt;
  if (name == "float") return v.kind == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.object;
  if (name == "iterable") {
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.object);
  }
  if (name == "sequence") {
    return v.is_undefined() || v.is_string() || (v.is_list() && !v.generator) ||
           (v.is_dict() && !v.object);
  }
  if (name == "callable") return v.kind == Kind::kCallable;
  if (name == "escaped") return v.markup;
  if (name == "lower") return v.is_string() && ascii_lower(v.s) == v.s;
  if (name == "upper") return v.is_string() && ascii_upper(v.s) == v.s;
  if (name == "odd" || name == "even") {
    if (v.kind != Kind::kInt && v.kind != Kind::kBool) {
      failf("test '{}' needs an integer, got {}", name, v.type_name());
    }
    int64_t x = v.kind == Kind::kBool ? v.b : v.i;
    return (x % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = arg(0);
    if (!v.is_number() || !d.is_number()) fail("divisibleby needs numbers");
    if (v.kind != Kind::kFloat && d.kind != Kind::kFloat) {
      int64_t x = v.kind == Kind::kBool ? v.b : v.i, y = d.kind == Kind::kBool ? d.b : d.i;
      if (y == 0) fail("integer division or modulo by zero");
      return x % y == 0;
    }
    if (d.as_double() == 0) fail("float modulo");
    return std::fmod(v.as_double(), d.as_double()) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, arg(0));
  if (name == "ne" || name == "!=") return !values_equal(v, arg(0));
  if (name == "lt" || name == "lessthan" || name == "<") return compare_op("<", v, arg(0));
  if (name == "le" || name == "<=") return compare_op("<=", v, arg(0));
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_op(">", v, arg(0));
  if (name == "ge" || name == ">=") return compare_op(">=", v, arg(0));
  if (name == "in") return contains(arg(0), v);
  if (name == "sameas") {
    const Value& o = arg(0);
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case Kind::kUndefined:
      case Kind::kNone: return true;
      case Kind::kBool: return v.b == o.b;
      case Kind::kList: return v.list == o.list;
      case Kind::kDict: return v.dict == o.dict;
      case Kind::kCallable: return v.fn == o.fn;
      default: return values_equal(v, o);
    }
  }
  failf("no test named '{}'", name);
}

}  // namespace hinge::jinja

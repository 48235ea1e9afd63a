// Jinja interpreter: expression evaluation (see jinja/interpreter.h).
#include <algorithm>

#include "jinja/interpreter.h"

namespace hinge::jinja {
namespace {

// Python's slice.indices(): normalized start/stop/step for a sequence of length n.
void slice_indices(int64_t n, const Value* start, const Value* stop, const Value* step,
                   int64_t* b, int64_t* e, int64_t* st) {
  auto as_int = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (v->kind == Kind::kInt) return v->i;
    if (v->kind == Kind::kBool) return v->b ? 1 : 0;
    failf("slice {} must be an integer or None", what);
  };
  *st = as_int(step, "step").value_or(1);
  if (*st == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, bool is_start) {
    if (!v) return *st > 0 ? (is_start ? int64_t{0} : n) : (is_start ? n - 1 : int64_t{-1});
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = *st > 0 ? 0 : -1;
    } else if (x >= n) {
      x = *st > 0 ? n : n - 1;
    }
    return x;
  };
  *b = clamp(as_int(start, "start"), true);
  *e = clamp(as_int(stop, "stop"), false);
}

}  // namespace

List iterate(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return {};
    case Kind::kList: return *v.list;
    case Kind::kDict: {
      if (v.object) break;
      List keys;
      keys.reserve(v.dict->items.size());
      for (const auto& [k, x] : v.dict->items) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (auto c : utf8_chars(v.s)) chars.push_back(Value::Str(std::string(c)));
      return chars;
    }
    default: break;
  }
  failf("'{}' object is not iterable", v.type_name());
}

void Interpreter::eval_args(const Expr& e, size_t first, CallArgs& args) {
  for (size_t k = first; k < e.children.size(); ++k) args.args.push_back(eval(*e.children[k]));
  for (const auto& [key, x] : e.kwargs) args.kwargs.emplace_back(key, eval(*x));
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) items.push_back(eval(*c));
      return Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::MakeDict();
      for (size_t k = 0; k + 1 < e.children.size(); k += 2) {
        Value key = eval(*e.children[k]);
        if (key.is_list() && !key.tuple) fail("unhashable type: 'list'");
        if (key.is_dict()) fail("unhashable type: 'dict'");
        d.dict->set(std::move(key), eval(*e.children[k + 1]));
      }
      return d;
    }
    case ExprKind::kGetAttr: return get_attr(eval(*e.children[0]), e.name);
    case ExprKind::kGetItem: return get_item(eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::kSlice: {
      Value obj = eval(*e.children[0]);
      Value parts[3];
      for (int k = 0; k < 3; ++k) {
        if (e.children[1 + k]) parts[k] = eval(*e.children[1 + k]);
      }
      auto part = [&](int k) { return e.children[1 + k] ? &parts[k] : nullptr; };
      if (obj.is_undefined()) fail(obj.s.empty() ? "value is undefined" : obj.s);
      bool is_seq = (obj.is_list() && !obj.generator) || obj.is_string();
      if (!is_seq) return Value::Undefined("object is not subscriptable");
      std::vector<std::string_view> chars;
      if (obj.is_string()) chars = utf8_chars(obj.s);
      int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size())
                                  : static_cast<int64_t>(obj.list->size());
      int64_t b, en, st;
      slice_indices(n, part(0), part(1), part(2), &b, &en, &st);
      List items;
      std::string s;
      for (int64_t k = b; st > 0 ? k < en : k > en; k += st) {
        if (obj.is_string()) {
          s += chars[static_cast<size_t>(k)];
        } else {
          items.push_back((*obj.list)[static_cast<size_t>(k)]);
        }
      }
      if (obj.is_string()) return Value::Str(std::move(s), obj.markup);
      return Value::MakeList(std::move(items), obj.tuple);
    }
    case ExprKind::kCall: return eval_call(e);
    case ExprKind::kFilter: return eval_filter(e, nullptr);
    case ExprKind::kTest: return eval_test(e);
    case ExprKind::kNot: return Value::Bool(!eval(*e.children[0]).truthy());
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.children[0]);
      if (v.is_undefined()) fail(v.s.empty() ? "value is undefined" : v.s);
      if (!v.is_number()) failf("bad operand type for unary {}: '{}'",
                                e.kind == ExprKind::kNeg ? '-' : '+', v.type_name());
      if (e.kind == ExprKind::kPos) return v.kind == Kind::kBool ? Value::Int(v.b) : v;
      if (v.kind == Kind::kFloat) return Value::Float(-v.f);
      int64_t x = v.kind == Kind::kBool ? v.b : v.i;
      if (x == INT64_MIN) fail("integer overflow");
      return Value::Int(-x);
    }
    case ExprKind::kBinary:
      return binary_op(*this, e.name, eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::kCompare: return eval_compare(e);
    case ExprKind::kAnd: {
      Value a = eval(*e.children[0]);
      return a.truthy() ? eval(*e.children[1]) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.children[0]);
      return a.truthy() ? a : eval(*e.children[1]);
    }
    case ExprKind::kCondExpr:
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::Undefined("the inline if-expression evaluated to false and no else section "
                              "was defined");
  }
  return Value::Undefined();
}

Value Interpreter::eval_call(const Expr& e) {
  Value fn = eval(*e.children[0]);
  CallArgs args;
  eval_args(e, 1, args);
  return call(fn, args);
}

Value Interpreter::eval_filter(const Expr& e, Value* block_input) {
  Value input;
  const Expr* c0 = e.children[0].get();
  if (!c0) {
    input = *block_input;
  } else if (c0->kind == ExprKind::kFilter && block_input) {
    input = eval_filter(*c0, block_input);
  } else {
    input = eval(*c0);
  }
  CallArgs args;
  eval_args(e, 1, args);
  return apply_filter(*this, e.name, input, args);
}

Value Interpreter::eval_test(const Expr& e) {
  Value v = eval(*e.children[0]);
  CallArgs args;
  eval_args(e, 1, args);
  return Value::Bool(apply_test(*this, e.name, v, args));
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.children[k + 1]);
    if (!compare_op(e.ops[k], left, right)) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

}  // namespace hinge::jinja

// Jinja interpreter: statements and expressions (see jinja/interpreter.h).
#include "jinja/interpreter.h"

namespace hinge::jinja {
namespace {

// Restores the interpreter's frame (and call depth) when a scope ends, errors included.
template <typename T>
struct Restore {
  T& ref;
  T saved;
  explicit Restore(T& r) : ref(r), saved(r) {}
  ~Restore() { ref = saved; }
};

[[noreturn]] void fail_undefined(const Value& v) {
  fail(v.s.empty() ? std::string("value is undefined") : v.s);
}

}  // namespace

Value* Interpreter::Frame::find(const std::string& name) {
  for (Frame* f = this; f; f = f->parent.get()) {
    for (auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}
void Interpreter::Frame::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

std::string Interpreter::render(const TemplateAst& ast, const Value& context) {
  auto globals = std::make_shared<Frame>();
  Value g = Value::MakeDict();
  add_globals(g);
  for (auto& [k, v] : g.dict->items) globals->vars.emplace_back(k.s, v);
  globals->set("namespace", Value::Function("namespace", [this](CallArgs& a) {
                 Value ns = make_namespace(a);
                 namespaces_.push_back(ns.dict);
                 return ns;
               }));
  frame_ = std::make_shared<Frame>();
  frame_->parent = globals;
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict->items) {
      if (k.is_string()) frame_->set(k.s, v);
    }
  }
  std::string out;
  // Namespaces may hold themselves (ns.me = ns): empty them all when the render ends.
  struct ClearNamespaces {
    std::vector<std::shared_ptr<Dict>>& list;
    ~ClearNamespaces() {
      for (auto& d : list) d->items.clear();
      list.clear();
    }
  } clear_namespaces{namespaces_};
  try {
    exec(ast.body, out);
  } catch (Error& e) {
    if (line_ > 0) e.message = fmt::format("line {}: {}", line_, e.message);
    frame_.reset();
    throw;
  }
  frame_.reset();
  return out;
}

void Interpreter::check_size(size_t n) const {
  if (n > limits_.max_output_bytes) {
    failf("value larger than the output limit ({} bytes)", limits_.max_output_bytes);
  }
}

void Interpreter::count_iterations(int64_t n) {
  iterations_ += n;
  if (n < 0 || iterations_ > limits_.max_loop_iterations) {
    failf("loop iteration limit ({}) exceeded", limits_.max_loop_iterations);
  }
}

void Interpreter::append(std::string& out, std::string_view text) const {
  if (out.size() + text.size() > limits_.max_output_bytes) {
    failf("output exceeds the limit of {} bytes", limits_.max_output_bytes);
  }
  out.append(text);
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

std::string Interpreter::render_body(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::kData: append(out, s.text); break;
    case StmtKind::kPrint: append(out, to_str(eval(*s.expr))); break;
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        line_ = s.line;
        if (eval(*cond).truthy()) return exec(body, out);
      }
      return exec(s.else_body, out);
    case StmtKind::kFor: return exec_for(s, out);
    case StmtKind::kSet:
    case StmtKind::kSetBlock: exec_set(s, out); break;
    case StmtKind::kMacro: frame_->set(s.text, make_macro(s, frame_, Value::Undefined())); break;
    case StmtKind::kCallBlock: {
      const Expr& call = *s.expr;
      Value fn = eval(*call.children[0]);
      CallArgs args;
      eval_args(call, 1, args);
      args.kwargs.emplace_back("caller", make_macro(s, frame_, Value::Undefined()));
      append(out, to_str(this->call(fn, args)));
      break;
    }
    case StmtKind::kFilterBlock: {
      Value text = Value::Str(render_body(s.body));
      append(out, to_str(eval_filter(*s.expr, &text)));
      break;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

static void bind_targets(const std::vector<std::string>& targets, const Value& item,
                         const std::function<void(const std::string&, Value)>& set) {
  if (targets.size() == 1) {
    set(targets[0], item);
    return;
  }
  List parts = iterate(item);
  if (parts.size() != targets.size()) {
    failf("{} values to unpack (expected {}, got {})",
          parts.size() > targets.size() ? "too many" : "not enough", targets.size(),
          parts.size());
  }
  for (size_t k = 0; k < parts.size(); ++k) set(targets[k], parts[k]);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, std::string& out) {
  List items = iterate(eval(*s.expr));
  Restore<std::shared_ptr<Frame>> restore(frame_);
  auto parent = frame_;
  auto bind_in_new_frame = [&](const Value& item) {
    frame_ = std::make_shared<Frame>();
    frame_->parent = parent;
    bind_targets(s.targets, item, [&](const std::string& n, Value v) { frame_->set(n, v); });
  };
  if (s.cond) {
    List kept;
    for (auto& item : items) {
      count_iterations(1);
      bind_in_new_frame(item);
      if (eval(*s.cond).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    frame_ = std::make_shared<Frame>();
    frame_->parent = parent;
    exec(s.else_body, out);
    return Flow::kNormal;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    count_iterations(1);
    bind_in_new_frame(items[k]);
    Value loop = Value::MakeDict();
    loop.object = true;
    auto& d = *loop.dict;
    d.set(Value::Str("index"), Value::Int(k + 1));
    d.set(Value::Str("index0"), Value::Int(k));
    d.set(Value::Str("revindex"), Value::Int(n - k));
    d.set(Value::Str("revindex0"), Value::Int(n - k - 1));
    d.set(Value::Str("first"), Value::Bool(k == 0));
    d.set(Value::Str("last"), Value::Bool(k == n - 1));
    d.set(Value::Str("length"), Value::Int(n));
    d.set(Value::Str("depth"), Value::Int(1));
    d.set(Value::Str("depth0"), Value::Int(0));
    d.set(Value::Str("previtem"),
          k > 0 ? items[k - 1] : Value::Undefined("there is no previous item"));
    d.set(Value::Str("nextitem"),
          k + 1 < n ? items[k + 1] : Value::Undefined("there is no next item"));
    d.set(Value::Str("cycle"), Value::Function("cycle", [k](CallArgs& a) -> Value {
            if (a.args.empty()) fail("no items for cycling given");
            return a.args[static_cast<size_t>(k) % a.args.size()];
          }));
    frame_->set("loop", std::move(loop));
    if (exec(s.body, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::exec_set(const Stmt& s, std::string&) {
  Value value;
  if (s.kind == StmtKind::kSetBlock) {
    value = Value::Str(render_body(s.body));
    if (s.expr) value = eval_filter(*s.expr, &value);
  } else {
    value = eval(*s.expr);
  }
  if (!s.text.empty()) {  // ns.attr = value
    Value ns = lookup(s.targets[0]);
    if (!ns.is_dict() || !ns.object) fail("cannot assign attribute on non-namespace object");
    ns.dict->set(Value::Str(s.text), std::move(value));
    return;
  }
  bind_targets(s.targets, value, [&](const std::string& n, Value v) { frame_->set(n, v); });
}

Value Interpreter::make_macro(const Stmt& s, std::shared_ptr<Frame> closure, Value caller) {
  const Stmt* def = &s;
  std::string name = s.kind == StmtKind::kMacro ? s.text : "caller";
  // A weak reference: the frame holds the macro, so a strong one would be a cycle.
  std::weak_ptr<Frame> weak_closure = closure;
  return Value::Function(name, [this, def, weak_closure, caller, name](CallArgs& args) -> Value {
    std::shared_ptr<Frame> closure = weak_closure.lock();
    if (!closure) failf("macro '{}' called after its scope ended", name);
    if (call_depth_ >= limits_.max_call_depth) {
      failf("maximum macro call depth ({}) exceeded", limits_.max_call_depth);
    }
    const auto& params = def->params;
    if (args.args.size() > params.size()) {
      failf("macro '{}' takes not more than {} argument(s)", name, params.size());
    }
    Value caller_v = caller;
    std::vector<const Value*> bound(params.size(), nullptr);
    for (size_t k = 0; k < args.args.size(); ++k) bound[k] = &args.args[k];
    for (const auto& [key, v] : args.kwargs) {
      size_t k = 0;
      while (k < params.size() && params[k].first != key) ++k;
      if (k < params.size()) {
        bound[k] = &v;
      } else if (key == "caller") {
        caller_v = v;
      } else {
        failf("macro '{}' has no argument named '{}'", name, key);
      }
    }
    Restore<std::shared_ptr<Frame>> restore_frame(frame_);
    Restore<int> restore_depth(call_depth_);
    Restore<int> restore_line(line_);
    ++call_depth_;
    frame_ = std::make_shared<Frame>();
    frame_->parent = closure;
    for (size_t k = 0; k < params.size(); ++k) {
      const auto& [pname, pdefault] = params[k];
      if (bound[k]) {
        frame_->set(pname, *bound[k]);
      } else if (pdefault) {
        frame_->set(pname, eval(*pdefault));
      } else {
        frame_->set(pname, Value::Undefined(fmt::format("parameter '{}' was not provided", pname)));
      }
    }
    if (!caller_v.is_undefined()) frame_->set("caller", caller_v);
    return Value::Str(render_body(def->body));
  });
}

Value Interpreter::lookup(const std::string& name) {
  if (Value* v = frame_->find(name)) return *v;
  return Value::Undefined(fmt::format("'{}' is undefined", name));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (fn.kind != Kind::kCallable) failf("'{}' object is not callable", fn.type_name());
  return fn.fn->fn(args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && obj.object) {
    if (const Value* v = obj.dict->find(name)) return *v;
  } else {
    Value m = bound_method(*this, obj, name);
    if (!m.is_undefined()) return m;
    if (obj.is_dict()) {
      if (const Value* v = obj.dict->find(name)) return *v;
    }
  }
  return Value::Undefined(fmt::format("'{}' object has no attribute '{}'", obj.type_name(), name));
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->find(key)) return *v;
  } else if ((obj.is_list() && !obj.generator) || obj.is_string()) {
    if (key.kind == Kind::kInt || key.kind == Kind::kBool) {
      int64_t idx = key.kind == Kind::kBool ? key.b : key.i;
      if (obj.is_list()) {
        int64_t n = static_cast<int64_t>(obj.list->size());
        if (idx < 0) idx += n;
        if (idx >= 0 && idx < n) return (*obj.list)[static_cast<size_t>(idx)];
      } else {
        auto chars = utf8_chars(obj.s);
        int64_t n = static_cast<int64_t>(chars.size());
        if (idx < 0) idx += n;
        if (idx >= 0 && idx < n) return Value::Str(std::string(chars[static_cast<size_t>(idx)]));
      }
      return Value::Undefined(fmt::format("{} object has no element {}", obj.type_name(), idx));
    }
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::Undefined(fmt::format("'{}' object has no element {}", obj.type_name(), repr(key)));
}

}  // namespace hinge::jinja

// Jinja interpreter: renders a TemplateAst with jinja2's semantics under Hugging Face's setup
// (ImmutableSandboxedEnvironment, loopcontrols, transformers' tojson, raise_exception,
// strftime_now). One Interpreter renders one template once; it is not thread-safe, but many may
// render the same (immutable) TemplateAst at once.
//
// Scoping as in jinja2: `set` writes the innermost frame; each for-loop iteration and each
// macro call gets a frame (so sets inside a loop do not leak out; namespace() objects carry
// state across); `if` has no frame. Macros see the frame they were defined in.
// Hostile templates are bounded by Limits: output bytes (also any single string or list built),
// loop iterations over the whole render, and macro call depth; each violation is an error.
// Errors throw jinja::Error (ChatTemplate turns them into Status).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace hinge::jinja {

struct Limits {
  size_t max_output_bytes = 16u << 20;
  int64_t max_loop_iterations = 1'000'000;  // all loops of one render together (and range())
  int max_call_depth = 100;                 // nested macro calls
};

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits) : limits_(limits) {}

  // Renders `ast` with the variables of `context` (a dict) plus the globals.
  std::string render(const TemplateAst& ast, const Value& context);

  // Used by filters, tests and builtins.
  Value call(const Value& fn, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  const Limits& limits() const { return limits_; }
  void check_size(size_t bytes_or_items) const;  // a string or list being built
  void count_iterations(int64_t n);

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;
    Value* find(const std::string& name);
    void set(const std::string& name, Value v);
  };
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s, std::string& out);
  Value make_macro(const Stmt& s, std::shared_ptr<Frame> closure, Value caller);
  std::string render_body(const Body& body);
  void append(std::string& out, std::string_view text) const;

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e, Value* block_input);
  Value eval_test(const Expr& e);
  Value eval_compare(const Expr& e);
  void eval_args(const Expr& e, size_t first, CallArgs& args);
  Value lookup(const std::string& name);

  Limits limits_;
  std::shared_ptr<Frame> frame_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;  // of the statement being run, for error messages
  std::vector<std::shared_ptr<Dict>> namespaces_;  // created by namespace(), emptied at the end
};

// Iteration over a value: list / tuple / generator items, dict keys, string characters,
// nothing for undefined; a TypeError for anything else.
List iterate(const Value& v);

// Operators (jinja/operators.cpp).
Value binary_op(const Interpreter& in, const std::string& op, const Value& a, const Value& b);
bool compare_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// Filters and tests (jinja/filters.cpp, jinja/is_tests.cpp); unknown names are errors.
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);

// Globals and methods (jinja/builtins.cpp).
void add_globals(Value& dict);
Value make_namespace(CallArgs& args);  // namespace(dict?, **kwargs)
// The bound method `name` of a string / dict / list; undefined when there is none.
Value bound_method(Interpreter& in, const Value& obj, const std::string& name);

}  // namespace hinge::jinja

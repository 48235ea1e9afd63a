// Jinja filters (jinja2.filters, plus transformers' tojson), see jinja/interpreter.h.
// map/select/reject/selectattr/rejectattr/items/unique/reverse/batch return "generators", as
// jinja2 does: no len(), not JSON-serializable, always truthy; |list turns them into lists.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "jinja/filters_util.h"

namespace hinge::jinja {

Value attr_path(Interpreter& in, const Value& obj, const std::string& path) {
  Value v = obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = in.get_item(v, digits ? Value::Int(std::atoll(part.c_str())) : Value::Str(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

int64_t arg_int(const Value* v, int64_t def, const char* filter) {
  if (!v || v->is_none()) return def;
  if (v->kind == Kind::kInt) return v->i;
  if (v->kind == Kind::kBool) return v->b;
  failf("{}: expected an integer argument, got {}", filter, v->type_name());
}
bool arg_bool(const Value* v, bool def) { return v ? v->truthy() : def; }

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string py_capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}
std::string jinja_title(const std::string& s) {
  // jinja2 do_title: split on runs of [-\s({\[<], capitalize each word.
  std::string out;
  bool word_start = true;
  for (char c : s) {
    bool sep = c == '-' || std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == '{' ||
               c == '[' || c == '<';
    if (sep) {
      out += c;
      word_start = true;
    } else {
      out += static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                          : std::tolower(static_cast<unsigned char>(c)));
      word_start = false;
    }
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    auto chars = utf8_chars(s);
    int64_t done = 0;
    for (auto c : chars) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += with;
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

static Value generator(List items) {
  Value v = Value::MakeList(std::move(items));
  v.generator = true;
  return v;
}

static Value filter_select(Interpreter& in, const std::string& name, const Value& input,
                           CallArgs& args) {
  bool attr_mode = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  size_t first = 0;
  std::string attr;
  if (attr_mode) {
    if (args.args.empty() || !args.args[0].is_string()) failf("{}: missing attribute", name);
    attr = args.args[0].s;
    first = 1;
  }
  std::string test;
  CallArgs test_args;
  if (args.args.size() > first) {
    test = to_str(args.args[first]);
    test_args.args.assign(args.args.begin() + first + 1, args.args.end());
    test_args.kwargs = args.kwargs;
  }
  List out;
  if (!input.truthy()) return generator({});  // jinja2: `if value:` (None maps to nothing)
  for (const Value& item : iterate(input)) {
    Value v = attr_mode ? attr_path(in, item, attr) : item;
    bool ok = test.empty() ? v.truthy() : apply_test(in, test, v, test_args);
    if (ok == keep_if) out.push_back(item);
  }
  return generator(std::move(out));
}

static Value filter_map(Interpreter& in, const Value& input, CallArgs& args) {
  List out;
  if (!input.truthy()) return generator({});  // jinja2: `if value:` (None maps to nothing)
  if (const Value* attribute = args.get(99, "attribute")) {
    const Value* def = args.get(99, "default");
    for (const Value& item : iterate(input)) {
      Value v = attr_path(in, item, to_str(*attribute));
      out.push_back(v.is_undefined() && def ? *def : v);
    }
    return generator(std::move(out));
  }
  if (args.args.empty()) fail("map: no filter or attribute given");
  std::string filter = to_str(args.args[0]);
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : iterate(input)) {
    CallArgs a = rest;
    out.push_back(apply_filter(in, filter, item, a));
  }
  return generator(std::move(out));
}

static Value filter_unique(Interpreter& in, const Value& input, CallArgs& args) {
  bool case_sensitive = arg_bool(args.get(0, "case_sensitive"), false);
  const Value* attribute = args.get(1, "attribute");
  List out, seen;
  for (const Value& item : iterate(input)) {
    Value key = attribute ? attr_path(in, item, to_str(*attribute)) : item;
    if (!case_sensitive && key.is_string()) key = Value::Str(ascii_lower(key.s));
    bool dup = false;
    for (const auto& s : seen) dup = dup || values_equal(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return generator(std::move(out));
}

static Value filter_tojson(const Value& input, CallArgs& args) {
  args.check("tojson", 4, {"indent", "separators", "sort_keys", "ensure_ascii"});
  const Value* indent_v = args.get(0, "indent");
  const Value* seps = args.get(1, "separators");
  const Value* sort = args.get(2, "sort_keys");
  const Value* ascii = args.get(3, "ensure_ascii");
  if (ascii && ascii->truthy()) fail("tojson: ensure_ascii=True is not supported");
  int indent = -1;
  if (indent_v && !indent_v->is_none()) {
    if (indent_v->kind != Kind::kInt) fail("tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(indent_v->i, 0, 64));
  }
  std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list->size() != 2) fail("tojson: separators must be a pair");
    item_sep = to_str((*seps->list)[0]);
    key_sep = to_str((*seps->list)[1]);
  }
  return Value::Str(to_json(input, indent, item_sep, key_sep, sort && sort->truthy()));
}

static Value filter_indent(const Value& input, CallArgs& args) {
  args.check("indent", 3, {"width", "first", "blank"});
  const Value* w = args.get(0, "width");
  std::string pad = w && w->is_string() ? w->s : std::string(arg_int(w, 4, "indent"), ' ');
  bool first = arg_bool(args.get(1, "first"), false);
  bool blank = arg_bool(args.get(2, "blank"), false);
  std::string s = to_str(input) + "\n";
  std::vector<std::string> lines;  // str.splitlines()
  size_t start = 0;
  for (size_t k = 0; k < s.size();) {
    size_t nl = 0;
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == '\r' && k + 1 < s.size() && s[k + 1] == '\n') {
      nl = 2;
    } else if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
      nl = 1;
    } else if (s.compare(k, 2, "\xc2\x85") == 0) {
      nl = 2;
    } else if (s.compare(k, 3, "\xe2\x80\xa8") == 0 || s.compare(k, 3, "\xe2\x80\xa9") == 0) {
      nl = 3;
    }
    if (nl) {
      lines.push_back(s.substr(start, k - start));
      k += nl;
      start = k;
    } else {
      ++k;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  std::string rv;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) rv += "\n";
    if (k == 0) {
      rv += lines[k];
    } else {
      rv += (blank || !lines[k].empty() ? pad : "") + lines[k];
    }
  }
  if (first) rv = pad + rv;
  return Value::Str(std::move(rv), input.markup);
}

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  if (name == "trim") {
    const Value* chars = args.get(0, "chars");
    std::string cs = chars && !chars->is_none() ? to_str(*chars) : std::string();
    return Value::Str(py_strip(to_str(input), 3, chars && !chars->is_none() ? &cs : nullptr),
                      input.markup);
  }
  if (name == "length" || name == "count") return Value::Int(py_len(input));
  if (name == "tojson") return filter_tojson(input, args);
  if (name == "items") {
    if (input.is_undefined()) return generator({});
    if (!input.is_dict() || input.object) fail("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, v] : input.dict->items) out.push_back(Value::MakeList({k, v}, true));
    return generator(std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value* def = args.get(0, "default_value");
    bool boolean = arg_bool(args.get(1, "boolean"), false);
    if (input.is_undefined() || (boolean && !input.truthy())) return def ? *def : Value::Str("");
    return input;
  }
  if (name == "string") return input.is_string() ? input : Value::Str(to_str(input));
  if (name == "lower") return Value::Str(ascii_lower(to_str(input)));
  if (name == "upper") return Value::Str(ascii_upper(to_str(input)));
  if (name == "capitalize") return Value::Str(py_capitalize(to_str(input)));
  if (name == "title") return Value::Str(jinja_title(to_str(input)));
  if (name == "safe") return Value::Str(to_str(input), true);
  if (name == "escape" || name == "e") {
    return input.markup ? input : Value::Str(html_escape(to_str(input)), true);
  }
  if (name == "join") {
    const Value* sep = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    std::string out, s = sep ? to_str(*sep) : "";
    bool first = true;
    for (const Value& item : iterate(input)) {
      if (!first) out += s;
      first = false;
      out += to_str(attribute ? attr_path(in, item, to_str(*attribute)) : item);
      in.check_size(out.size());
    }
    return Value::Str(std::move(out));
  }
  if (name == "list") return Value::MakeList(iterate(input));
  if (name == "first") {
    List items = iterate(input);
    return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (input.generator) fail("'generator' object is not reversible");
    List items = iterate(input);
    return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "map") return filter_map(in, input, args);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return filter_select(in, name, input, args);
  }
  if (name == "unique") return filter_unique(in, input, args);
  if (name == "replace") {
    if (args.args.size() < 2) fail("replace() needs 'old' and 'new'");
    int64_t count = arg_int(args.get(2, "count"), -1, "replace");
    std::string s = py_replace(to_str(input), to_str(args.args[0]), to_str(args.args[1]), count);
    in.check_size(s.size());
    return Value::Str(std::move(s));
  }
  if (name == "indent") return filter_indent(input, args);
  if (name == "attr") return in.get_attr(input, args.args.empty() ? "" : to_str(args.args[0]));
  return apply_filter_more(in, name, input, args);
}

}  // namespace hinge::jinja

#include "grammar/json_schema.h"

#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace hinge::grammar {
namespace {

using Json = nlohmann::ordered_json;

// The primitives every schema grammar shares.
constexpr const char* kPrimitives = R"(ws ::= " "?
string-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" string-char* "\""
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
)";

std::string literal(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\r') {
      o += "\\r";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c < 0x20) {
      o += fmt::format("\\x{:02X}", c);
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string json_text(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

class Compiler {
 public:
  Compiler(const Json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // "<prefix>root ::= ..." and the rules it uses (no primitives).
  StatusOr<std::string> run() {
    auto top = rule_for(root_, "");
    if (!top.ok()) return top.status();
    std::string out = prefix_ + "root ::= " + *top + "\n";
    for (const auto& r : rules_) out += r + "\n";
    return out;
  }

 private:
  Status unsupported(const std::string& where, const std::string& key) const {
    return Status::Errorf("'{}' at {} is not supported (hinge compiles OpenAI's strict subset: type, "
                          "properties, required, items, minItems, maxItems, minLength, maxLength, "
                          "enum, const, anyOf, oneOf, $ref / $defs)", key, where.empty() ? "the root" : where);
  }

  std::string fresh(const std::string& hint) {
    std::string n;
    for (char c : hint) n += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (n.empty() || n.size() > 40) n = "s";
    return fmt::format("{}{}-{}", prefix_, n, counter_++);
  }
  std::string add(const std::string& name, const std::string& body) {
    rules_.push_back(name + " ::= " + body);
    return name;
  }

  // A rule name (or an inline expression) for `s`, located at `where` (a JSON pointer).
  StatusOr<std::string> rule_for(const Json& s, const std::string& where) {
    if (++depth_ > 64) return Status::Errorf("the schema nests deeper than 64 at {}", where);
    auto r = compile(s, where);
    --depth_;
    return r;
  }

  StatusOr<std::string> compile(const Json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return unsupported(where, "true (any value)");
      return Status::Errorf("the schema at {} is false: nothing is valid", where.empty() ? "the root" : where);
    }
    if (!s.is_object()) return Status::Errorf("the schema at {} is not an object", where.empty() ? "the root" : where);
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
        "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs",
        "definitions", "title", "description", "default", "examples", "$schema", "$id", "strict",
        "$comment"};
    for (const auto& [k, v] : s.items())
      if (!kKnown.contains(k)) return unsupported(where, k);
    if (s.contains("$ref")) {
      if (s.size() > 1)
        for (const auto& [k, v] : s.items())
          if (k != "$ref" && k != "description" && k != "title" && k != "$defs" && k != "definitions")
            return unsupported(where, k + " beside $ref");
      return reference(s["$ref"], where);
    }
    if (s.contains("const")) return add(fresh("const"), literal(json_text(s["const"])));
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Status::Errorf("'enum' at {} must be a non-empty array", where);
      std::string body;
      for (const Json& v : e) body += (body.empty() ? "" : " | ") + literal(json_text(v));
      return add(fresh("enum"), body);
    }
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) {
        const Json& alts = s[k];
        if (!alts.is_array() || alts.empty()) return Status::Errorf("'{}' at {} must be a non-empty array", k, where);
        std::string body;
        for (size_t i = 0; i < alts.size(); ++i) {
          auto r = rule_for(alts[i], fmt::format("{}/{}/{}", where, k, i));
          if (!r.ok()) return r.status();
          body += (body.empty() ? "" : " | ") + *r;
        }
        return add(fresh("any"), body);
      }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) return unsupported(where, "allOf of more than one schema");
      return rule_for(all[0], where + "/allOf/0");
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return object(s, where);
      if (s.contains("items")) return array(s, where);
      return unsupported(where, "a schema without 'type' (any value)");
    }
    const Json& t = s["type"];
    if (t.is_array()) {
      std::string body;
      for (const Json& one : t) {
        if (!one.is_string()) return Status::Errorf("'type' at {} must name types", where);
        auto r = typed(s, one.get<std::string>(), where);
        if (!r.ok()) return r.status();
        body += (body.empty() ? "" : " | ") + *r;
      }
      if (body.empty()) return Status::Errorf("'type' at {} is an empty array", where);
      return add(fresh("types"), body);
    }
    if (!t.is_string()) return Status::Errorf("'type' at {} must be a string or an array", where);
    return typed(s, t.get<std::string>(), where);
  }

  StatusOr<std::string> typed(const Json& s, const std::string& type, const std::string& where) {
    if (type == "string") return string(s, where);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
        if (s.contains(k)) return unsupported(where, k);
      return type;
    }
    if (type == "object") return object(s, where);
    if (type == "array") return array(s, where);
    return Status::Errorf("'type' at {}: unknown type '{}'", where, type);
  }

  StatusOr<int64_t> bound(const Json& s, const char* key, const std::string& where, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
      return Status::Errorf("'{}' at {} must be an integer in [0, 10000]", key, where);
    return v.get<int64_t>();
  }

  StatusOr<std::string> string(const Json& s, const std::string& where) {
    auto lo = bound(s, "minLength", where, 0);
    auto hi = bound(s, "maxLength", where, -1);
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    if (*lo == 0 && *hi < 0) return std::string("string");
    if (*hi >= 0 && *hi < *lo) return Status::Errorf("'maxLength' below 'minLength' at {}", where);
    return add(fresh("str"), fmt::format("\"\\\"\" string-char{{{},{}}} \"\\\"\"", *lo, *hi < 0 ? std::string() : std::to_string(*hi)));
  }

  StatusOr<std::string> array(const Json& s, const std::string& where) {
    auto lo = bound(s, "minItems", where, 0);
    auto hi = bound(s, "maxItems", where, -1);
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    if (*hi >= 0 && *hi < *lo) return Status::Errorf("'maxItems' below 'minItems' at {}", where);
    if (!s.contains("items")) return unsupported(where, "an array without 'items'");
    auto item = rule_for(s["items"], where + "/items");
    if (!item.ok()) return item.status();
    // "[" (item ("," item){lo-1,hi-1})? "]", the first item required when lo > 0.
    const std::string more = fmt::format("(\",\" ws {}){{{},{}}}", *item, std::max<int64_t>(0, *lo - 1),
                                         *hi < 0 ? std::string() : std::to_string(std::max<int64_t>(0, *hi - 1)));
    std::string body;
    if (*hi == 0) body = "\"[\" \"]\"";
    else if (*lo > 0) body = fmt::format("\"[\" {} {} \"]\"", *item, more);
    else body = fmt::format("\"[\" ({} {})? \"]\"", *item, more);
    return add(fresh("arr"), body);
  }

  StatusOr<std::string> object(const Json& s, const std::string& where) {
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) return unsupported(where, "additionalProperties other than false");
    }
    std::vector<std::pair<std::string, std::string>> req, opt;  // (member rule, name)
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::Errorf("'required' at {} must be an array", where);
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Status::Errorf("'required' at {} must list names", where);
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Status::Errorf("'properties' at {} must be an object", where);
      for (const auto& [name, sub] : s["properties"].items()) {
        auto v = rule_for(sub, where + "/properties/" + name);
        if (!v.ok()) return v.status();
        const std::string member = fmt::format("{} ws \":\" ws {}", literal(json_text(Json(name))), *v);
        (required.contains(name) ? req : opt).emplace_back(member, name);
        required.erase(name);
      }
    }
    if (!required.empty())
      return Status::Errorf("'required' at {} names '{}', which is not in 'properties'", where, *required.begin());
    std::string body = "\"{\" ";
    for (size_t i = 0; i < req.size(); ++i) body += (i ? "\",\" ws " : "") + req[i].first + " ";
    if (!opt.empty()) {
      if (!req.empty()) {
        for (const auto& o : opt) body += "(\",\" ws " + o.first + ")? ";
      } else {
        // The first optional member present, then any of the later ones.
        std::string alts;
        for (size_t k = 0; k < opt.size(); ++k) {
          std::string a = opt[k].first;
          for (size_t j = k + 1; j < opt.size(); ++j) a += " (\",\" ws " + opt[j].first + ")?";
          alts += (alts.empty() ? "" : " | ") + a;
        }
        body += "(" + alts + ")? ";
      }
    }
    body += "\"}\"";
    return add(fresh("obj"), body);
  }

  StatusOr<std::string> reference(const Json& ref, const std::string& where) {
    if (!ref.is_string()) return Status::Errorf("'$ref' at {} must be a string", where);
    const std::string r = ref.get<std::string>();
    std::string name;
    const Json* defs = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) == 0) {
        name = r.substr(std::string(prefix).size());
        const std::string key = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        if (root_.contains(key) && root_[key].is_object() && root_[key].contains(name)) defs = &root_[key][name];
      }
    }
    if (r == "#") defs = &root_;
    if (defs == nullptr) return Status::Errorf("'$ref' at {}: '{}' is not in the schema's $defs", where, r);
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const std::string rule = fresh("def-" + name);
    refs_[r] = rule;  // before compiling: a recursive reference finds it
    auto body = rule_for(*defs, r.substr(1));
    if (!body.ok()) return body.status();
    add(rule, *body);
    return rule;
  }

  const Json& root_;
  std::string prefix_;
  std::vector<std::string> rules_;
  std::unordered_map<std::string, std::string> refs_;
  int counter_ = 0;
  int depth_ = 0;
};

}  // namespace

constexpr const char* kAnyValue = R"(any-value ::= any-object | any-array | string | number | boolean | null
any-object ::= "{" (string ws ":" ws any-value ("," ws string ws ":" ws any-value)*)? "}"
any-array ::= "[" (any-value ("," ws any-value)*)? "]"
)";

StatusOr<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  auto rules = Compiler(schema, "").run();
  if (!rules.ok()) return rules.status();
  return *rules + kPrimitives;  // its root is "root"
}

StatusOr<std::string> json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix) {
  return Compiler(schema, prefix).run();
}

std::string json_primitives_gbnf() { return std::string(kPrimitives) + kAnyValue; }

std::string gbnf_literal(const std::string& text) { return literal(text); }

std::string json_object_gbnf() { return std::string("root ::= any-object\n") + kPrimitives + kAnyValue; }

std::string choice_gbnf(const std::vector<std::string>& choices) {
  std::string body;
  for (const std::string& c : choices) body += (body.empty() ? "" : " | ") + literal(c);
  return "root ::= " + (body.empty() ? std::string("\"\"") : body) + "\n";
}

}  // namespace hinge::grammar

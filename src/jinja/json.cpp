// JSON <-> Value: context conversion and the tojson filter (Python's json.dumps with
// ensure_ascii=False, as Hugging Face transformers registers it).
#include <algorithm>
#include <cmath>

#include "jinja/value.h"

namespace hinge::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::None();
    case T::boolean: return Value::Bool(j.get<bool>());
    case T::number_integer: return Value::Int(j.get<int64_t>());
    case T::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::Float(j.get<double>());
    case T::string: return Value::Str(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::MakeList(std::move(items));
    }
    case T::object: {
      Value d = Value::MakeDict();
      for (const auto& [k, e] : j.items()) d.dict->items.emplace_back(Value::Str(k), from_json(e));
      return d;
    }
    default: return Value::None();  // binary / discarded: not produced by JSON text
  }
}

static void json_string(std::string_view s, std::string& out) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

namespace {
struct JsonWriter {
  int indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * level, ' ');
  }

  void write(const Value& v, int level) {
    if (level > kMaxValueDepth) fail("tojson: maximum value nesting depth exceeded");
    switch (v.kind) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += v.b ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(v.i); return;
      case Kind::kFloat: out += json_float(v.f); return;
      case Kind::kString: json_string(v.s, out); return;
      case Kind::kList:
        if (v.generator) break;
        write_seq(*v.list, level);
        return;
      case Kind::kDict:
        if (v.object) break;
        write_dict(v, level);
        return;
      default: break;
    }
    failf("Object of type {} is not JSON serializable", v.type_name());
  }

  void write_seq(const List& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out += item_sep;
      if (indent >= 0) newline(level + 1);
      write(items[k], level + 1);
    }
    if (indent >= 0) newline(level);
    out += ']';
  }

  static std::string key_string(const Value& k) {
    switch (k.kind) {
      case Kind::kString: return k.s;
      case Kind::kInt: return std::to_string(k.i);
      case Kind::kFloat: return json_float(k.f);
      case Kind::kBool: return k.b ? "true" : "false";
      case Kind::kNone: return "null";
      default: failf("keys must be str, int, float, bool or None, not {}", k.type_name());
    }
  }

  void write_dict(const Value& v, int level) {
    if (v.dict->items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [k, x] : v.dict->items) entries.emplace_back(key_string(k), &x);
    if (sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out += '{';
    for (size_t k = 0; k < entries.size(); ++k) {
      if (k) out += item_sep;
      if (indent >= 0) newline(level + 1);
      json_string(entries[k].first, out);
      out += key_sep;
      write(*entries[k].second, level + 1);
    }
    if (indent >= 0) newline(level);
    out += '}';
  }
};
}  // namespace

std::string to_json(const Value& v, int indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys) {
  JsonWriter w{indent, item_sep, key_sep, sort_keys, {}};
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace hinge::jinja

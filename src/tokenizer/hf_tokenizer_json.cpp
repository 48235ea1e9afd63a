// Tokenizer::spec_from_hf: a Hugging Face tokenizer.json with a BPE model (+ tokenizer_config.json)
// -> VocabSpec. Supported shapes:
//   byte-level ("gpt2"): pre_tokenizer ByteLevel, or a Sequence of Split(Regex, Isolated) /
//     Digits / ByteLevel; the Split regexes become VocabSpec::pre_regexes.
//   raw-text ("hf-bpe-spm"): normalizer Prepend("▁") / Replace(" " -> "▁") (NFC/NFKC are
//     ignored: they do not change the texts these vocabularies are used with) or pre_tokenizer
//     Metaspace, or neither.
// Anything else is refused with a message naming the file and the unsupported part.
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace hinge {

namespace {

using nlohmann::json;

constexpr int64_t kMaxHfTokens = int64_t{1} << 24;

StatusOr<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errorf("{}: cannot open", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Errorf("{}: not valid JSON", path);
  return j;
}

std::optional<std::string> get_string(const json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<bool> get_bool(const json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

const json* get(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return (it == o.end() || it->is_null()) ? nullptr : &*it;
}

// tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const json& o, const char* key) {
  const json* v = get(o, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  return get_string(*v, "content");
}

// A regex that matches `s` literally.
std::string quote_regex(std::string_view s) {
  std::string out = "\\Q";
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "\\E") == 0) {
      out += "\\E\\\\E\\Q";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out + "\\E";
}

// Byte-level pre-tokenizer pieces -> regex chain. Returns an error message for unsupported ones.
std::optional<std::string> collect_byte_level(const json& pt, std::vector<std::string>* regexes,
                                              bool* byte_level) {
  const std::string type = get_string(pt, "type").value_or("");
  if (type == "Sequence") {
    const json* items = get(pt, "pretokenizers");
    if (!items || !items->is_array()) return "pre_tokenizer Sequence without pretokenizers";
    for (const json& item : *items)
      if (auto err = collect_byte_level(item, regexes, byte_level)) return err;
    return std::nullopt;
  }
  if (type == "ByteLevel") {
    *byte_level = true;
    if (get_bool(pt, "add_prefix_space").value_or(false))
      return "ByteLevel add_prefix_space is not supported";
    if (get_bool(pt, "use_regex").value_or(true)) {
      const PreTokenizerPreset* gpt2 = find_pre_tokenizer_preset("gpt-2");
      regexes->insert(regexes->end(), gpt2->regexes.begin(), gpt2->regexes.end());
    }
    return std::nullopt;
  }
  if (type == "Split") {
    const json* pattern = get(pt, "pattern");
    const std::string behavior = get_string(pt, "behavior").value_or("");
    if (behavior != "Isolated" || get_bool(pt, "invert").value_or(false))
      return "Split pre_tokenizer with behavior '" + behavior + "' is not supported";
    if (pattern) {
      if (auto re = get_string(*pattern, "Regex")) {
        regexes->push_back(*re);
        return std::nullopt;
      }
      if (auto s = get_string(*pattern, "String")) {
        regexes->push_back(quote_regex(*s));
        return std::nullopt;
      }
    }
    return "Split pre_tokenizer without a pattern";
  }
  if (type == "Digits") {
    regexes->push_back(get_bool(pt, "individual_digits").value_or(false) ? "\\p{N}" : "\\p{N}+");
    return std::nullopt;
  }
  return "pre_tokenizer type '" + type + "' is not supported";
}

// Finds TemplateProcessing (possibly inside a Sequence) and reads whether the single-sequence
// template starts / ends with a special token.
void read_template(const json& pp, std::optional<std::string>* first,
                   std::optional<std::string>* last) {
  const std::string type = get_string(pp, "type").value_or("");
  if (type == "Sequence") {
    if (const json* items = get(pp, "processors"); items && items->is_array())
      for (const json& item : *items) read_template(item, first, last);
    return;
  }
  if (type != "TemplateProcessing") return;
  const json* single = get(pp, "single");
  if (!single || !single->is_array() || single->empty()) return;
  auto special = [](const json& item) -> std::optional<std::string> {
    if (const json* st = get(item, "SpecialToken")) return get_string(*st, "id");
    return std::nullopt;
  };
  *first = special(single->front());
  *last = special(single->back());
}

}  // namespace

StatusOr<VocabSpec> Tokenizer::spec_from_hf(const std::string& json_path,
                                            const std::string& config_path) {
  auto fail = [&](const std::string& what) { return Status::Errorf("{}: {}", json_path, what); };
  HINGE_ASSIGN_OR_RETURN(json j, read_json(json_path));
  json cfg = json::object();
  if (!config_path.empty()) {
    HINGE_ASSIGN_OR_RETURN(cfg, read_json(config_path));
  }
  try {
    const json* model = get(j, "model");
    if (!model || !model->is_object()) return fail("no \"model\" object");
    const std::string model_type = get_string(*model, "type").value_or("BPE");
    if (model_type != "BPE")
      return fail("model type '" + model_type + "' is not supported (BPE only)");

    // id -> text from the vocab, then added tokens (tokenizer.json, then tokenizer_config.json).
    std::map<int64_t, std::string> texts;
    std::map<int64_t, bool> added_special;  // added token id -> special
    const json* vocab = get(*model, "vocab");
    if (!vocab || !vocab->is_object()) return fail("model.vocab is not an object");
    for (const auto& [text, id] : vocab->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxHfTokens)
        return fail("model.vocab entry '" + text + "' has a bad id");
      texts[id.get<int64_t>()] = text;
    }
    auto add_token = [&](int64_t id, const std::string& content, bool special) -> Status {
      if (id < 0 || id >= kMaxHfTokens)
        return fail(fmt::format("added token id {} out of range", id));
      texts[id] = content;
      added_special[id] = special;
      return Status::Ok();
    };
    if (const json* added = get(j, "added_tokens"); added && added->is_array()) {
      for (const json& t : *added) {
        const json* id = get(t, "id");
        auto content = get_string(t, "content");
        if (!id || !id->is_number_integer() || !content)
          return fail("malformed added_tokens entry");
        HINGE_RETURN_IF_ERROR(
            add_token(id->get<int64_t>(), *content, get_bool(t, "special").value_or(false)));
      }
    }
    if (const json* dec = get(cfg, "added_tokens_decoder"); dec && dec->is_object()) {
      for (const auto& [key, t] : dec->items()) {
        auto content = get_string(t, "content");
        int64_t id = -1;
        try {
          id = std::stoll(key);
        } catch (const std::exception&) {
          return Status::Errorf("{}: added_tokens_decoder key '{}' is not an id", config_path, key);
        }
        if (!content)
          return Status::Errorf("{}: malformed added_tokens_decoder entry", config_path);
        HINGE_RETURN_IF_ERROR(add_token(id, *content, get_bool(t, "special").value_or(false)));
      }
    }
    if (texts.empty()) return fail("the vocabulary is empty");

    VocabSpec spec;
    const bool byte_fallback = get_bool(*model, "byte_fallback").value_or(false);
    const auto unk_text = get_string(*model, "unk_token");
    const size_t n = static_cast<size_t>(texts.rbegin()->first + 1);
    spec.tokens.resize(n);
    spec.token_types.assign(n, static_cast<int32_t>(TokenType::kUnused));
    for (size_t i = 0; i < n; ++i) spec.tokens[i] = "[PAD" + std::to_string(i) + "]";
    for (const auto& [id, text] : texts) {
      const size_t i = static_cast<size_t>(id);
      spec.tokens[i] = text;
      TokenType type = TokenType::kNormal;
      if (auto it = added_special.find(id); it != added_special.end()) {
        type = it->second ? TokenType::kControl : TokenType::kUserDefined;
      } else if (byte_fallback && text.size() == 6 && text.compare(0, 3, "<0x") == 0 &&
                 text[5] == '>') {
        type = TokenType::kByte;
      }
      if (unk_text && text == *unk_text) type = TokenType::kUnknown;
      spec.token_types[i] = static_cast<int32_t>(type);
    }
    auto id_of = [&](const std::optional<std::string>& text) -> int32_t {
      if (!text) return -1;
      for (const auto& [id, t] : texts)
        if (t == *text) return static_cast<int32_t>(id);
      return -1;
    };

    if (const json* merges = get(*model, "merges")) {
      if (!merges->is_array()) return fail("model.merges is not an array");
      spec.merge_pairs.reserve(merges->size());
      for (const json& m : *merges) {
        if (m.is_string()) {
          const std::string s = m.get<std::string>();
          const size_t sp = s.find(' ');
          if (sp == std::string::npos) return fail("merge '" + s + "' is not \"a b\"");
          spec.merge_pairs.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
          spec.merge_pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
          return fail("malformed entry in model.merges");
        }
      }
    }
    spec.ignore_merges = get_bool(*model, "ignore_merges").value_or(false);

    // Byte-level or raw-text BPE.
    const json* pre = get(j, "pre_tokenizer");
    const json* decoder = get(j, "decoder");
    std::vector<std::string> regexes;
    bool byte_level = decoder && get_string(*decoder, "type").value_or("") == "ByteLevel";
    if (pre && get_string(*pre, "type").value_or("") != "Metaspace") {
      if (auto err = collect_byte_level(*pre, &regexes, &byte_level)) return fail(*err);
    }
    if (byte_level) {
      spec.model = "gpt2";
      spec.pre = "gpt-2";
      const PreTokenizerPreset* gpt2 = find_pre_tokenizer_preset("gpt-2");
      if (regexes != gpt2->regexes) {
        spec.pre = "hf-split";
        spec.pre_regexes = std::move(regexes);
      }
      spec.add_space_prefix = false;
      if (get(j, "normalizer")) return fail("a normalizer with a byte-level BPE is not supported");
    } else {
      spec.model = "hf-bpe-spm";
      spec.byte_fallback = byte_fallback;
      spec.fuse_unk = get_bool(*model, "fuse_unk").value_or(false);
      spec.add_space_prefix = false;
      spec.escape_whitespace = false;
      if (const json* norm = get(j, "normalizer")) {
        std::vector<const json*> items;
        if (get_string(*norm, "type").value_or("") == "Sequence") {
          const json* list = get(*norm, "normalizers");
          if (!list || !list->is_array()) return fail("normalizer Sequence without normalizers");
          for (const json& x : *list) items.push_back(&x);
        } else {
          items.push_back(norm);
        }
        for (const json* x : items) {
          const std::string type = get_string(*x, "type").value_or("");
          if (type == "Prepend" && get_string(*x, "prepend") == std::string(unicode::kSpmSpace)) {
            spec.add_space_prefix = true;
            spec.space_prefix_scope = SpacePrefixScope::kWholeText;
          } else if (type == "Replace" && get(*x, "pattern") &&
                     get_string(*get(*x, "pattern"), "String") == std::string(" ") &&
                     get_string(*x, "content") == std::string(unicode::kSpmSpace)) {
            spec.escape_whitespace = true;
          } else if (type != "NFC" && type != "NFKC") {
            return fail("normalizer '" + type + "' is not supported");
          }
        }
      }
      if (pre) {  // Metaspace
        if (get_string(*pre, "replacement").value_or(std::string(unicode::kSpmSpace)) !=
            unicode::kSpmSpace)
          return fail("Metaspace with a replacement other than U+2581 is not supported");
        spec.escape_whitespace = true;
        std::string scheme = get_string(*pre, "prepend_scheme").value_or("");
        if (scheme.empty())
          scheme = get_bool(*pre, "add_prefix_space").value_or(true) ? "always" : "never";
        spec.add_space_prefix = scheme != "never";
        spec.space_prefix_scope = scheme == "first" ? SpacePrefixScope::kMetaspaceFirst
                                                    : SpacePrefixScope::kMetaspaceAlways;
        spec.metaspace_split = get_bool(*pre, "split").value_or(true);
      }
    }

    // Special tokens and BOS/EOS policy: tokenizer_config.json first, then the post-processor.
    std::optional<std::string> tmpl_first, tmpl_last;
    if (const json* pp = get(j, "post_processor")) read_template(*pp, &tmpl_first, &tmpl_last);
    spec.unk =
        id_of(token_text(cfg, "unk_token").has_value() ? token_text(cfg, "unk_token") : unk_text);
    spec.bos = id_of(token_text(cfg, "bos_token"));
    spec.eos = id_of(token_text(cfg, "eos_token"));
    spec.pad = id_of(token_text(cfg, "pad_token"));
    if (spec.bos < 0 && tmpl_first) spec.bos = id_of(tmpl_first);
    spec.add_bos = get_bool(cfg, "add_bos_token")
                       .value_or(tmpl_first && id_of(tmpl_first) == spec.bos && spec.bos >= 0);
    spec.add_eos = get_bool(cfg, "add_eos_token")
                       .value_or(tmpl_last && tmpl_last != tmpl_first &&
                                 id_of(tmpl_last) == spec.eos && spec.eos >= 0);
    if (spec.add_bos && spec.bos < 0)
      return fail("add_bos_token is true but there is no BOS token");
    if (spec.add_eos && spec.eos < 0)
      return fail("add_eos_token is true but there is no EOS token");
    return spec;
  } catch (const json::exception& e) {
    return fail(std::string("malformed tokenizer: ") + e.what());
  }
}

}  // namespace hinge

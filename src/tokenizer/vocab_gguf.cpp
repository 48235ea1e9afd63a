// write_vocab_gguf and Tokenizer::spec_from_gguf: VocabSpec <-> GGUF tokenizer keys (the layout
// is described in vocab_gguf.h).
#include "tokenizer/vocab_gguf.h"

#include <optional>
#include <string_view>
#include <unordered_map>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace hinge {

namespace {

constexpr std::string_view kKind = "hinge.tokenizer.kind";
constexpr std::string_view kMergePairs = "hinge.tokenizer.merge_pairs";
constexpr std::string_view kMerges = "hinge.tokenizer.merges";
constexpr std::string_view kPreRegexes = "hinge.tokenizer.pre_regexes";
constexpr std::string_view kIgnoreMerges = "hinge.tokenizer.ignore_merges";
constexpr std::string_view kByteFallback = "hinge.tokenizer.byte_fallback";
constexpr std::string_view kFuseUnk = "hinge.tokenizer.fuse_unk";
constexpr std::string_view kEscapeWhitespace = "hinge.tokenizer.escape_whitespace";
constexpr std::string_view kMetaspaceSplit = "hinge.tokenizer.metaspace_split";
constexpr std::string_view kSpacePrefixScope = "hinge.tokenizer.space_prefix_scope";

// U+0120, what convert_hf_to_gguf.py writes for a space inside a merge piece ("a b" strings).
constexpr std::string_view kMergeSpace = "\xC4\xA0";

constexpr struct {
  SpacePrefixScope scope;
  std::string_view name;
} kScopeNames[] = {{SpacePrefixScope::kEachFragment, "each_fragment"},
                   {SpacePrefixScope::kWholeText, "whole_text"},
                   {SpacePrefixScope::kMetaspaceAlways, "metaspace_always"},
                   {SpacePrefixScope::kMetaspaceFirst, "metaspace_first"}};

bool known_model(std::string_view m) {
  return m == "llama" || m == "gpt2" || m == "hf-bpe-spm" || m == "gemma4" || m == "bert";
}

// Numbers of a GGUF numeric array (any integer or float element type); nullopt otherwise.
std::optional<std::vector<double>> numeric_array(const gguf::GgufFile& f, std::string_view key) {
  const gguf::Value* v = f.find(key);
  if (!v || v->type != gguf::ValueType::ARRAY) return std::nullopt;
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const gguf::Value& e : v->array) {
    if (e.type == gguf::ValueType::STRING || e.type == gguf::ValueType::ARRAY ||
        e.type == gguf::ValueType::BOOL)
      return std::nullopt;
    auto x = e.as_float();
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

// The spec's merges as (left, right) pairs in rank order ("a b" strings split as Vocab does).
std::vector<std::pair<std::string, std::string>> merge_pairs_of(const VocabSpec& spec) {
  if (!spec.merge_pairs.empty()) return spec.merge_pairs;
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(spec.merges.size());
  for (const std::string& m : spec.merges) {
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) {
      out.emplace_back();  // malformed: keeps the ranks of the others, matches nothing
    } else {
      out.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
  }
  return out;
}

}  // namespace

std::vector<float> gguf_token_scores(const VocabSpec& spec) {
  if (!spec.scores.empty() || spec.model != "hf-bpe-spm") return spec.scores;
  const auto pairs = merge_pairs_of(spec);
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(spec.tokens.size());
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    ids.emplace(spec.tokens[i], static_cast<int32_t>(i));  // a repeated piece keeps its first id
  std::vector<float> scores(spec.tokens.size(), 0.0f - static_cast<float>(pairs.size()));
  std::vector<bool> made(spec.tokens.size(), false);
  for (size_t r = 0; r < pairs.size(); ++r) {
    const auto& [left, right] = pairs[r];
    if (left.empty() || right.empty()) continue;
    auto it = ids.find(left + right);
    if (it == ids.end() || made[static_cast<size_t>(it->second)]) continue;
    made[static_cast<size_t>(it->second)] = true;
    scores[static_cast<size_t>(it->second)] = 0.0f - static_cast<float>(r);
  }
  return scores;
}

void write_vocab_gguf(gguf::GgufWriter& w, const VocabSpec& v) {
  using gguf::Value;
  const bool hf = v.model == "hf-bpe-spm";
  const std::string standard_model = hf ? "llama" : v.model;

  // Standard layer (llama.cpp).
  w.set("tokenizer.ggml.model", Value::str(standard_model));
  if (!v.pre.empty()) w.set("tokenizer.ggml.pre", Value::str(v.pre));
  w.set("tokenizer.ggml.tokens", Value::str_array(v.tokens));
  if (std::vector<float> scores = gguf_token_scores(v); !scores.empty())
    w.set("tokenizer.ggml.scores", Value::f32_array(scores));
  if (!v.token_types.empty()) w.set("tokenizer.ggml.token_type", Value::i32_array(v.token_types));
  bool merges_need_pairs = false;  // a piece holds a space: "a b" strings are ambiguous
  if (standard_model == "gpt2" || standard_model == "gemma4") {
    std::vector<std::string> merges = v.merges;
    if (!v.merge_pairs.empty()) {
      merges.clear();
      merges.reserve(v.merge_pairs.size());
      for (const auto& [left, right] : v.merge_pairs) {
        merges_need_pairs = merges_need_pairs || left.find(' ') != std::string::npos ||
                            right.find(' ') != std::string::npos;
        merges.push_back(unicode::replace_all(left, " ", kMergeSpace) + " " +
                         unicode::replace_all(right, " ", kMergeSpace));
      }
    }
    w.set("tokenizer.ggml.merges", Value::str_array(merges));  // required, even when empty
  }
  const struct {
    const char* key;
    int32_t id;
  } ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},     {"tokenizer.ggml.eos_token_id", v.eos},
             {"tokenizer.ggml.unknown_token_id", v.unk}, {"tokenizer.ggml.padding_token_id", v.pad},
             {"tokenizer.ggml.eot_token_id", v.eot},     {"tokenizer.ggml.eom_token_id", v.eom},
             {"tokenizer.ggml.seperator_token_id", v.sep}};
  for (const auto& e : ids)
    if (e.id >= 0) w.set(e.key, Value::u32(static_cast<uint32_t>(e.id)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(v.add_bos));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(v.add_eos));
  if (standard_model == "llama")
    w.set("tokenizer.ggml.add_space_prefix", Value::boolean(v.add_space_prefix));
  if (standard_model == "bert") {
    w.set("tokenizer.ggml.normalizer.lowercase", Value::boolean(v.lowercase));
    w.set("tokenizer.ggml.normalizer.strip_accents", Value::boolean(v.strip_accents));
  }

  // hinge layer.
  w.set(std::string(kKind), Value::str(v.model));
  if (!v.merge_pairs.empty() && (hf || merges_need_pairs)) {
    std::vector<std::string> flat;
    flat.reserve(2 * v.merge_pairs.size());
    for (const auto& [left, right] : v.merge_pairs) {
      flat.push_back(left);
      flat.push_back(right);
    }
    w.set(std::string(kMergePairs), Value::str_array(flat));
  }
  if (hf && v.merge_pairs.empty() && !v.merges.empty())
    w.set(std::string(kMerges), Value::str_array(v.merges));
  if (!v.pre_regexes.empty()) w.set(std::string(kPreRegexes), Value::str_array(v.pre_regexes));
  w.set(std::string(kIgnoreMerges), Value::boolean(v.ignore_merges));
  if (hf) {
    w.set(std::string(kByteFallback), Value::boolean(v.byte_fallback));
    w.set(std::string(kFuseUnk), Value::boolean(v.fuse_unk));
    w.set(std::string(kEscapeWhitespace), Value::boolean(v.escape_whitespace));
    w.set(std::string(kMetaspaceSplit), Value::boolean(v.metaspace_split));
    for (const auto& s : kScopeNames)
      if (s.scope == v.space_prefix_scope)
        w.set(std::string(kSpacePrefixScope), Value::str(std::string(s.name)));
  }
}

StatusOr<VocabSpec> Tokenizer::spec_from_gguf(const gguf::GgufFile& f) {
  const std::string& path = f.path();
  auto fail = [&](const std::string& what) { return Status::Errorf("{}: {}", path, what); };
  VocabSpec spec;

  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return fail("no tokenizer (tokenizer.ggml.model is missing)");
  if (*model != "llama" && *model != "gpt2" && *model != "gemma4" && *model != "bert")
    return fail(fmt::format(
        "unsupported tokenizer model '{}' (hinge reads llama, gpt2, gemma4 and bert)", *model));
  const bool spm = *model == "llama";
  const bool gemma4 = *model == "gemma4";
  const bool bert = *model == "bert";
  // A file written by hinge says which tokenizer it really is.
  const bool from_hinge = f.find(kKind) != nullptr;
  spec.model = *model;
  if (from_hinge) {
    auto kind = f.get_string(kKind);
    if (!kind || !known_model(*kind))
      return fail(fmt::format("unsupported {} '{}'", kKind, kind.value_or("(not a string)")));
    spec.model = *kind;
  }
  auto string_array =
      [&](std::string_view key) -> StatusOr<std::optional<std::vector<std::string>>> {
    if (!f.find(key)) return std::optional<std::vector<std::string>>();
    auto a = f.get_string_array(key);
    if (!a) return fail(fmt::format("{} is not a string array", key));
    return std::optional<std::vector<std::string>>(std::move(*a));
  };
  HINGE_ASSIGN_OR_RETURN(auto pre_regexes, string_array(kPreRegexes));
  if (pre_regexes) spec.pre_regexes = std::move(*pre_regexes);

  spec.pre = f.get_string("tokenizer.ggml.pre").value_or(spm || gemma4 || bert ? "default" : "");
  if (spec.pre.empty()) spec.pre = "default";

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return fail("tokenizer.ggml.tokens is missing or not a string array");
  if (tokens->empty()) return fail("tokenizer.ggml.tokens is empty");
  spec.tokens = std::move(*tokens);
  const size_t n = spec.tokens.size();

  if (f.find("tokenizer.ggml.scores")) {
    auto scores = numeric_array(f, "tokenizer.ggml.scores");
    if (!scores) return fail("tokenizer.ggml.scores is not a numeric array");
    if (scores->size() < n)
      return fail(
          fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", scores->size(), n));
    spec.scores.assign(scores->begin(), scores->begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (f.find("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types) return fail("tokenizer.ggml.token_type is not an integer array");
    if (types->size() < n)
      return fail(
          fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", types->size(), n));
    spec.token_types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      spec.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);
    }
  }

  HINGE_ASSIGN_OR_RETURN(auto flat_pairs, string_array(kMergePairs));
  if (flat_pairs) {
    if (flat_pairs->size() % 2 != 0)
      return fail(
          fmt::format("{} has an odd number of pieces ({})", kMergePairs, flat_pairs->size()));
    spec.merge_pairs.reserve(flat_pairs->size() / 2);
    for (size_t i = 0; i < flat_pairs->size(); i += 2)
      spec.merge_pairs.emplace_back(std::move((*flat_pairs)[i]), std::move((*flat_pairs)[i + 1]));
  }
  HINGE_ASSIGN_OR_RETURN(auto hinge_merges, string_array(kMerges));
  if (hinge_merges) spec.merges = std::move(*hinge_merges);

  if (gemma4) {
    HINGE_ASSIGN_OR_RETURN(auto merges, string_array("tokenizer.ggml.merges"));
    if (!merges && !flat_pairs) return fail("tokenizer.ggml.merges is missing");
    if (merges && !flat_pairs) spec.merges = std::move(*merges);
    spec.add_space_prefix = false;
  } else if (bert) {
    spec.add_space_prefix = true;  // every word starts with U+2581; decoding drops the first
  } else if (!spm) {
    HINGE_ASSIGN_OR_RETURN(auto merges, string_array("tokenizer.ggml.merges"));
    if (!merges && !flat_pairs) return fail("tokenizer.ggml.merges is missing");
    // With merge_pairs, the "a b" strings are their lossy copy for llama.cpp.
    if (merges && !flat_pairs) spec.merges = std::move(*merges);
    if (spec.pre_regexes.empty()) {
      const PreTokenizerPreset* preset = find_pre_tokenizer_preset(spec.pre);
      if (!preset) return fail(fmt::format("unknown pre-tokenizer '{}'", spec.pre));
      spec.ignore_merges = preset->ignore_merges;
      spec.add_bos = preset->add_bos;
    }
    spec.add_space_prefix = false;
  }

  // Special ids: llama.cpp's defaults (not for hinge's own files, which write every id they
  // have), replaced by in-range values from the file.
  if (!from_hinge && bert) {
    spec.bos = 101;  // [CLS]
    spec.unk = 100;
    spec.sep = 102;
    spec.pad = 0;
  } else if (!from_hinge && !gemma4) {
    spec.bos = spm ? 1 : 11;
    spec.eos = spm ? 2 : 11;
    spec.unk = spm ? 0 : -1;
  }
  const struct {
    const char* key;
    int32_t* id;
  } ids[] = {{"tokenizer.ggml.bos_token_id", &spec.bos},
             {"tokenizer.ggml.eos_token_id", &spec.eos},
             {"tokenizer.ggml.unknown_token_id", &spec.unk},
             {"tokenizer.ggml.padding_token_id", &spec.pad},
             {"tokenizer.ggml.eot_token_id", &spec.eot},
             {"tokenizer.ggml.eom_token_id", &spec.eom},
             {"tokenizer.ggml.seperator_token_id", &spec.sep}};
  for (const auto& e : ids) {
    if (*e.id >= static_cast<int64_t>(n)) *e.id = -1;
    const auto v = f.get_int(e.key);
    if (v && *v >= 0 && *v < static_cast<int64_t>(n)) *e.id = static_cast<int32_t>(*v);
  }

  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) spec.add_bos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) spec.add_eos = *b;
  if (spm) {
    if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) spec.add_space_prefix = *b;
  }
  // llama.cpp always starts a Gemma 4 text with BOS (its workaround for files that say false).
  if (gemma4) spec.add_bos = true;
  if (bert) {
    spec.add_bos = true;
    if (auto b = f.get_bool("tokenizer.ggml.normalizer.lowercase")) spec.lowercase = *b;
    spec.strip_accents = spec.lowercase;
    if (auto b = f.get_bool("tokenizer.ggml.normalizer.strip_accents")) spec.strip_accents = *b;
  }

  // The rest of the hinge layer.
  const struct {
    std::string_view key;
    bool* flag;
  } flags[] = {{kIgnoreMerges, &spec.ignore_merges},
               {kByteFallback, &spec.byte_fallback},
               {kFuseUnk, &spec.fuse_unk},
               {kEscapeWhitespace, &spec.escape_whitespace},
               {kMetaspaceSplit, &spec.metaspace_split}};
  for (const auto& e : flags) {
    if (!f.find(e.key)) continue;
    auto b = f.get_bool(e.key);
    if (!b) return fail(fmt::format("{} is not a bool", e.key));
    *e.flag = *b;
  }
  if (f.find(kSpacePrefixScope)) {
    auto name = f.get_string(kSpacePrefixScope);
    bool found = false;
    for (const auto& s : kScopeNames) {
      if (name && *name == s.name) {
        spec.space_prefix_scope = s.scope;
        found = true;
      }
    }
    if (!found)
      return fail(
          fmt::format("unknown {} '{}'", kSpacePrefixScope, name.value_or("(not a string)")));
  }

  if (spec.add_bos && spec.bos < 0)
    return fail("tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (spec.add_eos && spec.eos < 0)
    return fail("tokenizer.ggml.add_eos_token is true but there is no EOS token");
  return spec;
}

}  // namespace hinge

#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"

namespace hinge {

namespace {

// llama.cpp's GPT-2 splitter (custom code for this regex, which also covers a trailing `\s+`).
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// (?i:'s|...) spelled without the inline flag, as llama.cpp adapted it.
#define HINGE_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
constexpr const char* kLlama3 = HINGE_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 = HINGE_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen3.5: letters and combining marks together ([\p{L}\p{M}]+), marks out of the symbol run.
constexpr const char* kQwen35 = HINGE_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kBailing =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr const char* kSeedCoder = HINGE_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" HINGE_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" HINGE_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
#undef HINGE_CONTRACTIONS
constexpr const char* kCjk = "[一-龥ࠀ-一가-퟿]+";
constexpr const char* kBloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
// \p{L}-like ranges of the deepseek-llm tokenizer, escaped (NFC would fold some of them).
constexpr const char* kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})re"
    R"re(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F})re"
    R"re(\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481})re"
    R"re(\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD})re"
    R"re(\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77})re"
    R"re(\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45})re"
    R"re(\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})re"
    R"re(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
    R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})re"
    R"re(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})re"
    R"re(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})re"
    R"re(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
    R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})re"
    R"re(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})re"
    R"re(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})re"
    R"re(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
    R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";

struct NamedPreset {
  std::vector<std::string_view> names;
  PreTokenizerPreset preset;
};

// The regex chains of llama.cpp's llm_tokenizer_bpe, by tokenizer.ggml.pre name.
const std::vector<NamedPreset>& presets() {
  static const std::vector<NamedPreset> kPresets = {
      {{"default", ""},
       {{R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}, false, false}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt",
        "olmo", "jais", "roberta-bpe", "jina-v1-en", "jina-v2-code", "exaone4", "trillion",
        "granite-docling", "a.x-4.0", "mellum", "modern-bert"},
       {{kGpt2}, false, false}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {{kLlama3}, true, true}},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {{kLlama3}, false, false}},
      {{"deepseek-llm"},
       {{"[\r\n]", kDeepseekLlmLetters, R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re",
         kCjk, R"re(\p{N}+)re"},
        false,
        false}},
      {{"deepseek-coder"},
       {{"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjk, R"re(\p{N})re"}, false, false}},
      {{"deepseek-v3", "hunyuan-dense"},
       {{R"re(\p{N}{1,3})re", "[一-龥぀-ゟ゠-ヿ]+",
         R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
        false,
        false}},
      {{"falcon"}, {{R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}, false, false}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {{R"re(\p{N})re", kGpt2}, false, false}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez", "kormo", "f2llmv2",
        "solar-open"},
       {{kQwen2}, false, false}},
      {{"qwen35"}, {{kQwen35}, false, false}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {{kBloom}, false, false}},
      {{"viking"}, {{kBloom, R"re(\p{N})re"}, false, false}},
      {{"tekken"}, {{kTekken}, true, true}},
      {{"gpt-4o", "llama4"}, {{kGpt4o}, false, false}},
      {{"chameleon"},
       {{"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re",
         R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
        false,
        true}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {{kBailing}, false, false}},
      {{"seed-coder"}, {{kSeedCoder}, false, false}},
      {{"grok-2"}, {{kQwen2}, false, false}},
  };
  return kPresets;
}

// The 25 Unicode White_Space characters (llama.cpp's unicode_set_whitespace), as class ranges.
constexpr std::string_view kWhitespaceRanges =
    R"re(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})re";

// Rewrites \s and \S to kWhitespaceRanges (PCRE2's own \s set differs at U+0085).
StatusOr<std::string> rewrite_whitespace(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char d = p[i + 1];
      if (d == 's') {
        out +=
            in_class ? std::string(kWhitespaceRanges) : "[" + std::string(kWhitespaceRanges) + "]";
      } else if (d == 'S') {
        if (in_class) return Status::Errorf("pre-tokenizer regex '{}': \\S inside a class", p);
        out += "[^" + std::string(kWhitespaceRanges) + "]";
      } else {
        out += c;
        out += d;
      }
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

}  // namespace

const PreTokenizerPreset* find_pre_tokenizer_preset(std::string_view name) {
  for (const NamedPreset& p : presets())
    for (std::string_view n : p.names)
      if (n == name) return &p.preset;
  return nullptr;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::vector<std::string> regexes) {
  auto pt = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  for (const std::string& re : regexes) {
    HINGE_ASSIGN_OR_RETURN(std::string rewritten, rewrite_whitespace(re));
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Status::Errorf("pre-tokenizer regex '{}': {} at offset {}", re,
                            reinterpret_cast<const char*>(msg), err_off);
    }
    (void)pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
    pt->regexes_.push_back(std::move(c));
  }
  return pt;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  // Decode as llama.cpp does (invalid bytes -> U+FFFD), then re-encode twice: `subject` is valid
  // UTF-8 for PCRE2 (surrogates -> U+FFFD, same 3 bytes), `orig` is what the pieces are cut from.
  const std::vector<uint32_t> cpts = unicode::decode_lenient(text);
  std::string subject, orig;
  subject.reserve(text.size());
  orig.reserve(text.size());
  for (uint32_t c : cpts) {
    unicode::append_utf8(&orig, c);
    unicode::append_utf8(&subject, (c >= 0xD800 && c <= 0xDFFF) ? unicode::kReplacementChar : c);
  }

  // Pieces as [begin, end) byte ranges of subject/orig.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!subject.empty()) pieces.push_back({0, subject.size()});
  const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data());
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<std::pair<size_t, size_t>> next;
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      const size_t len = end - begin;
      size_t pos = 0, last = 0;
      while (pos <= len && md) {
        int rc = pcre2_match(re->code, base + begin, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // e.g. JIT stack exhausted: interpret instead
          rc = pcre2_match(re->code, base + begin, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                           nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (ms > last) next.push_back({begin + last, begin + ms});
        if (me > ms) {
          next.push_back({begin + ms, begin + me});
          last = me;
          pos = me;
        } else {  // empty match: step over one character
          if (ms >= len) break;
          pos = ms + unicode::seq_len(subject[begin + ms]);
        }
      }
      if (last < len) next.push_back({begin + last, end});
    }
    if (md) pcre2_match_data_free(md);
    pieces = std::move(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces)
    words.push_back(unicode::byte_encode(std::string_view(orig).substr(begin, end - begin)));
  return words;
}

}  // namespace hinge

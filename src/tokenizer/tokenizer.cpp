#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wordpiece.h"

namespace hinge {

namespace {

// Token texts that end generation whatever their id (llama.cpp's list, minus its per-model
// workarounds); they are also forced to control type, as llama.cpp does.
constexpr std::array<std::string_view, 11> kEogTexts = {
    "<|eot_id|>",           "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|endoftext|>",
    "<|eom_id|>",           "<EOT>",      "_<EOT>",  "<|end_of_text|>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>"};

bool is_special_type(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
}

}  // namespace

// A run of raw text ([off, off + len) of the input) or one special token.
struct Tokenizer::Fragment {
  int32_t token;  // -1 for raw text
  size_t off;
  size_t len;
};

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::create(VocabSpec spec) {
  const bool spm = spec.model == "llama";
  const bool gpt2 = spec.model == "gpt2";
  const bool hf = spec.model == "hf-bpe-spm";
  const bool gemma4 = spec.model == "gemma4";
  const bool bert = spec.model == "bert";
  if (!spm && !gpt2 && !hf && !gemma4 && !bert)
    return Status::Errorf(
        "tokenizer: unsupported model '{}' (expected llama, gpt2, hf-bpe-spm, gemma4 or bert)",
        spec.model);

  auto t = std::unique_ptr<Tokenizer>(new Tokenizer());
  HINGE_ASSIGN_OR_RETURN(t->vocab_, Vocab::build(spec));
  const Vocab& v = *t->vocab_;
  for (int32_t* id :
       {&spec.bos, &spec.eos, &spec.unk, &spec.pad, &spec.eot, &spec.eom, &spec.sep})
    if (!v.valid(*id)) *id = -1;
  if (spec.add_bos && spec.bos < 0)
    return Status::Error("tokenizer: add_bos is set but the vocabulary has no BOS token");
  if (spec.add_eos && spec.eos < 0)
    return Status::Error("tokenizer: add_eos is set but the vocabulary has no EOS token");

  t->ignore_merges_ = spec.ignore_merges;
  if (gpt2) {
    std::vector<std::string> regexes = spec.pre_regexes;
    if (regexes.empty()) {
      const PreTokenizerPreset* preset = find_pre_tokenizer_preset(spec.pre);
      if (!preset) return Status::Errorf("tokenizer: unknown pre-tokenizer '{}'", spec.pre);
      regexes = preset->regexes;
      t->ignore_merges_ = t->ignore_merges_ || preset->ignore_merges;
    }
    HINGE_ASSIGN_OR_RETURN(t->pre_, PreTokenizer::create(std::move(regexes)));
  }
  t->strip_first_space_ = !gpt2 && !gemma4 && spec.add_space_prefix;
  if (bert) {
    for (int32_t id = 0; id < v.size(); ++id)
      t->max_token_bytes_ = std::max(t->max_token_bytes_, v.text(id).size());
  }

  // End-of-generation set; EOG-looking texts become control tokens (hidden when decoding).
  std::vector<TokenType>& types = t->types_;
  types.resize(static_cast<size_t>(v.size()));
  for (int32_t id = 0; id < v.size(); ++id) types[static_cast<size_t>(id)] = v.type(id);
  for (int32_t id : {spec.eos, spec.eot, spec.eom})
    if (id >= 0) t->eog_.insert(id);
  for (std::string_view text : kEogTexts) {
    const int32_t id = v.find(text);
    if (id < 0) continue;
    t->eog_.insert(id);
    types[static_cast<size_t>(id)] = TokenType::kControl;
  }

  for (int32_t id = 0; id < v.size(); ++id)
    if (is_special_type(types[static_cast<size_t>(id)])) t->special_ids_.push_back(id);
  std::stable_sort(t->special_ids_.begin(), t->special_ids_.end(),
                   [&](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });

  t->pieces_.resize(static_cast<size_t>(v.size()));
  for (int32_t id = 0; id < v.size(); ++id) {
    std::string& piece = t->pieces_[static_cast<size_t>(id)];
    switch (types[static_cast<size_t>(id)]) {
      case TokenType::kUserDefined:
        piece = v.text(id);
        break;
      case TokenType::kByte:
        piece.assign(1, static_cast<char>(v.byte_value(id)));
        break;
      case TokenType::kNormal:
        if (!gpt2) {
          piece = unicode::replace_all(v.text(id), unicode::kSpmSpace, " ");
        } else {
          const std::string& text = v.text(id);
          for (size_t off = 0; off < text.size();) {
            const size_t len = std::min(unicode::seq_len(text[off]), text.size() - off);
            const int b = unicode::unicode_to_byte(std::string_view(text).substr(off, len));
            if (b >= 0) {
              piece.push_back(static_cast<char>(b));
            } else {
              piece.append(text, off, len);  // not a byte character: keep it as written
            }
            off += len;
          }
        }
        break;
      default:  // control, unknown, unused, undefined
        break;
    }
  }
  t->spec_ = std::move(spec);
  return t;
}

int32_t Tokenizer::n_vocab() const {
  return vocab_->size();
}

TokenType Tokenizer::token_type(int32_t id) const {
  return vocab_->valid(id) ? types_[static_cast<size_t>(id)] : TokenType::kUndefined;
}

int32_t Tokenizer::token_id(std::string_view text) const {
  return vocab_->find(text);
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  return vocab_->valid(id) ? pieces_[static_cast<size_t>(id)] : std::string();
}

std::string Tokenizer::piece_after(int32_t prev_id, int32_t id) const {
  std::string piece = token_to_piece(id);
  if (strip_first_space_ && (prev_id < 0 || prev_id == spec_.bos) && !piece.empty() &&
      piece[0] == ' ') {
    piece.erase(0, 1);
  }
  return piece;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t id : ids) {
    out += piece_after(prev, id);
    prev = id;
  }
  return out;
}

// Splits the text at every occurrence of a special token, longest tokens first (llama.cpp's
// tokenizer_st_partition). Control and unknown tokens only count when parse_special.
std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text,
                                                      bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    if (!parse_special && types_[static_cast<size_t>(id)] != TokenType::kUserDefined) continue;
    const std::string& needle = vocab_->text(id);
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.off, f.len);
      size_t pos = 0;
      while (true) {
        const size_t hit = raw.find(needle, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, f.off + pos, hit - pos});
        next.push_back({id, f.off + hit, needle.size()});
        pos = hit + needle.size();
        changed = true;
      }
      if (pos < raw.size()) next.push_back({-1, f.off + pos, raw.size() - pos});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  const std::vector<Fragment> frags = partition(text, parse_special);
  if (add_special && spec_.add_bos) out.push_back(spec_.bos);
  if (spec_.model == "llama") {
    encode_spm(text, frags, &out);
  } else if (spec_.model == "gpt2") {
    encode_gpt2(text, frags, &out);
  } else if (spec_.model == "gemma4") {
    encode_gemma4(text, frags, &out);
  } else if (spec_.model == "bert") {
    encode_bert(text, frags, &out);
  } else {
    encode_hf_spm(text, frags, &out);
  }
  if (add_special && spec_.add_eos) out.push_back(spec_.eos);
  if (add_special && spec_.model == "bert" && spec_.sep >= 0) out.push_back(spec_.sep);
  return out;
}

void Tokenizer::encode_spm(std::string_view text, const std::vector<Fragment>& frags,
                           std::vector<int32_t>* out) const {
  bool prev_special = true;  // the text start counts as "after a special token"
  std::string buf;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
      prev_special = true;
      continue;
    }
    buf.clear();
    if (spec_.add_space_prefix && prev_special) buf.push_back(' ');
    buf.append(text.substr(f.off, f.len));
    spm_encode(*vocab_, spec_.unk, unicode::replace_all(buf, " ", unicode::kSpmSpace), out);
    prev_special = false;
  }
}

void Tokenizer::encode_gpt2(std::string_view text, const std::vector<Fragment>& frags,
                            std::vector<int32_t>* out) const {
  BpeOptions opts;
  opts.unk = spec_.unk;
  opts.ignore_merges = ignore_merges_;
  BpeScratch scratch;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
      continue;
    }
    for (const std::string& word : pre_->split(text.substr(f.off, f.len)))
      bpe_encode_word(*vocab_, opts, word, &scratch, out);
  }
}

void Tokenizer::encode_hf_spm(std::string_view text, const std::vector<Fragment>& frags,
                              std::vector<int32_t>* out) const {
  BpeOptions opts;
  opts.unk = spec_.unk;
  opts.ignore_merges = ignore_merges_;
  opts.hf_chars = true;
  opts.byte_fallback = spec_.byte_fallback;
  opts.fuse_unk = spec_.fuse_unk;
  BpeScratch scratch;
  const std::string_view space = spec_.escape_whitespace ? unicode::kSpmSpace : " ";
  const std::string_view prefix = spec_.add_space_prefix ? space : "";

  auto encode_text = [&](std::string_view raw, bool with_prefix) {
    std::string s(with_prefix ? prefix : "");
    s += raw;
    if (spec_.escape_whitespace) s = unicode::replace_all(s, " ", unicode::kSpmSpace);
    if (!spec_.metaspace_split) {
      bpe_encode_word(*vocab_, opts, s, &scratch, out);
      return;
    }
    // Metaspace split: every U+2581 starts a new word.
    size_t begin = 0;
    while (begin < s.size()) {
      size_t next = s.find(unicode::kSpmSpace, begin + 1);
      if (next == std::string::npos) next = s.size();
      bpe_encode_word(*vocab_, opts, std::string_view(s).substr(begin, next - begin), &scratch,
                      out);
      begin = next;
    }
  };

  bool prev_special = true;
  for (size_t i = 0; i < frags.size(); ++i) {
    const Fragment& f = frags[i];
    if (f.token >= 0) {
      if (i == 0 && spec_.add_space_prefix &&
          spec_.space_prefix_scope == SpacePrefixScope::kWholeText) {
        encode_text("", true);  // the prefix of the whole text stands alone before the token
      }
      out->push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.off, f.len);
    const bool starts_with_space = raw[0] == ' ' || raw.substr(0, 3) == unicode::kSpmSpace;
    bool with_prefix = false;
    switch (spec_.space_prefix_scope) {
      case SpacePrefixScope::kEachFragment:
        with_prefix = prev_special;
        break;
      case SpacePrefixScope::kWholeText:
        with_prefix = f.off == 0;
        break;
      case SpacePrefixScope::kMetaspaceAlways:
        with_prefix = !starts_with_space;
        break;
      case SpacePrefixScope::kMetaspaceFirst:
        with_prefix = f.off == 0 && !starts_with_space;
        break;
    }
    encode_text(raw, with_prefix);
    prev_special = false;
  }
}

void Tokenizer::encode_gemma4(std::string_view text, const std::vector<Fragment>& frags,
                              std::vector<int32_t>* out) const {
  BpeOptions opts;
  opts.hex_byte_leftovers = true;
  BpeScratch scratch;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
      continue;
    }
    const std::string s = unicode::replace_all(text.substr(f.off, f.len), " ", unicode::kSpmSpace);
    // Runs of newlines and runs of everything else; a run of newlines that is a token is kept
    // whole (llama.cpp's fix for Gemma 4).
    for (size_t begin = 0; begin < s.size();) {
      const bool newlines = s[begin] == '\n';
      size_t end = begin;
      while (end < s.size() && (s[end] == '\n') == newlines) ++end;
      const std::string_view word = std::string_view(s).substr(begin, end - begin);
      const int32_t id = newlines ? vocab_->find(word) : -1;
      if (id >= 0) {
        out->push_back(id);
      } else {
        bpe_encode_word(*vocab_, opts, word, &scratch, out);
      }
      begin = end;
    }
  }
}

void Tokenizer::encode_bert(std::string_view text, const std::vector<Fragment>& frags,
                            std::vector<int32_t>* out) const {
  WordPieceOptions opts;
  opts.lowercase = spec_.lowercase;
  opts.strip_accents = spec_.strip_accents;
  opts.unk = spec_.unk;
  opts.max_token_bytes = max_token_bytes_;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
    } else {
      wordpiece_encode(*vocab_, opts, text.substr(f.off, f.len), out);
    }
  }
}

}  // namespace hinge

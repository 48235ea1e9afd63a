#include "tokenizer/wordpiece.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>

#include <algorithm>
#include <string>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace hinge {
namespace {

// The first code point of the canonical decomposition (what llama.cpp's NFD table holds).
uint32_t nfd_first(uint32_t cpt) {
  if (cpt > 0x10FFFF) return cpt;
  static const UNormalizer2* const nfd = [] {  // ICU's singleton, looked up once
    UErrorCode e = U_ZERO_ERROR;
    const UNormalizer2* n = unorm2_getNFDInstance(&e);
    return U_FAILURE(e) ? nullptr : n;
  }();
  if (nfd == nullptr) return cpt;
  UErrorCode err = U_ZERO_ERROR;
  UChar buf[32];
  const int32_t n = unorm2_getDecomposition(nfd, static_cast<UChar32>(cpt), buf, 32, &err);
  if (U_FAILURE(err) || n <= 0) return cpt;
  UChar32 first;
  int32_t i = 0;
  U16_NEXT(buf, i, n, first);
  return static_cast<uint32_t>(first);
}

bool is_chinese_char(uint32_t c) {  // llama.cpp's ranges (from HF's BertPreTokenizer)
  return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

enum class Kind { kWhitespace, kDrop, kAlone, kWord };

// Classifies a (normalized) code point; values beyond Unicode are unassigned.
Kind classify(uint32_t c, const WordPieceOptions& opts) {
  const bool valid = c <= 0x10FFFF;
  if (valid && u_isUWhiteSpace(static_cast<UChar32>(c))) return Kind::kWhitespace;
  const int32_t cat = valid ? static_cast<int32_t>(u_charType(static_cast<UChar32>(c)))
                            : static_cast<int32_t>(U_UNASSIGNED);
  const uint32_t mask = U_MASK(cat);
  if (c == 0 || c == unicode::kReplacementChar ||
      (mask & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK)))
    return Kind::kDrop;
  if (opts.strip_accents && (mask & U_GC_M_MASK)) return Kind::kDrop;
  if ((mask & U_GC_P_MASK) || (c < 0x7F && (mask & U_GC_S_MASK)) || is_chinese_char(c))
    return Kind::kAlone;
  return Kind::kWord;
}

}  // namespace

void wordpiece_encode(const Vocab& vocab, const WordPieceOptions& opts, std::string_view text,
                      std::vector<int32_t>* out) {
  // Normalize and split into words (llama.cpp's preprocess).
  std::vector<std::string> words(1);
  for (uint32_t c : unicode::decode_lenient(text)) {
    if (opts.strip_accents) c = nfd_first(c);
    const Kind kind = classify(c, opts);
    if (kind == Kind::kWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (kind == Kind::kDrop) continue;
    if (opts.lowercase && c <= 0x10FFFF) c = static_cast<uint32_t>(u_tolower(static_cast<UChar32>(c)));
    if (kind == Kind::kAlone) {
      if (!words.back().empty()) words.emplace_back();
      unicode::append_utf8(&words.back(), c);
      words.emplace_back();
    } else {
      unicode::append_utf8(&words.back(), c);
    }
  }
  // Longest-match-first cover of "▁" + word, over bytes as llama.cpp runs it.
  std::string w;
  for (const std::string& word : words) {
    if (word.empty()) continue;
    w.assign(unicode::kSpmSpace);
    w += word;
    const size_t n = w.size();
    const size_t start = out->size();
    for (size_t i = 0; i < n;) {
      bool match = false;
      for (size_t j = std::min(n, i + opts.max_token_bytes + 1); j > i; --j) {
        const int32_t id = vocab.find(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out->push_back(id);
          match = true;
          i = j;
          break;
        }
      }
      if (!match) {
        out->resize(start);
        break;
      }
    }
    if (out->size() == start && opts.unk >= 0) out->push_back(opts.unk);
  }
}

}  // namespace hinge

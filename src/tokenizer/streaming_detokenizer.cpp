// StreamingDetokenizer (declared in tokenizer.h): UTF-8 validation of the byte stream, holding
// back only a valid-so-far incomplete sequence at the end.
#include "tokenizer/tokenizer.h"

namespace hinge {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// For a lead byte: the sequence length and the allowed range of the second byte (well-formed
// UTF-8, Unicode table 3-7: no overlongs, surrogates or values above U+10FFFF). 0: not a lead.
struct Lead {
  int len;
  uint8_t lo;
  uint8_t hi;
};
Lead classify(uint8_t c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tok_.piece_after(prev_, id);
  prev_ = id;
  return take_complete(false);
}

std::string StreamingDetokenizer::flush() {
  return take_complete(true);
}

// Returns the decodable prefix of pending_ (each maximal invalid subpart -> U+FFFD) and keeps an
// incomplete final sequence unless `final`, when it becomes U+FFFD too.
std::string StreamingDetokenizer::take_complete(bool final) {
  std::string out;
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<uint8_t>(pending_[i]);
    const Lead lead = classify(c);
    if (lead.len == 1) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (lead.len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Count the valid continuation bytes present.
    int k = 1;
    while (k < lead.len && i + k < n) {
      const auto b = static_cast<uint8_t>(pending_[i + k]);
      const bool ok = k == 1 ? (b >= lead.lo && b <= lead.hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++k;
    }
    if (k == lead.len) {
      out.append(pending_, i, static_cast<size_t>(k));
      i += static_cast<size_t>(k);
    } else if (i + k == n && !final) {
      break;  // incomplete but valid so far: hold back
    } else {
      out += kReplacement;  // maximal invalid subpart
      i += static_cast<size_t>(k);
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace hinge

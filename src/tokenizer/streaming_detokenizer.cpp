// StreamingDetokenizer (declared in tokenizer.h): UTF-8 validation of the byte stream, holding
// back only a valid-so-far incomplete sequence at the end.
#include "tokenizer/tokenizer.h"

#include "common/utf8.h"

namespace hinge {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

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
    const Utf8Lead lead = utf8_lead(c);
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

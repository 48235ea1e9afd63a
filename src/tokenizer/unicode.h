// UTF-8 and GPT-2 byte-level helpers for the tokenizers, with llama.cpp's exact (lenient)
// decoding rules so that invalid input tokenizes the way llama.cpp tokenizes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hinge::unicode {

constexpr uint32_t kReplacementChar = 0xFFFD;
// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's escaped space.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Length of the UTF-8 sequence announced by a lead byte, from its high nibble (llama.cpp's
// unicode_len_utf8): 1 for ASCII and for stray continuation bytes, 2, 3 or 4 otherwise.
inline size_t seq_len(char lead) {
  static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[static_cast<uint8_t>(lead) >> 4];
}

// Codepoints of `text` as llama.cpp decodes them: a sequence whose lead or continuation bytes are
// wrong becomes U+FFFD and decoding resumes at the next byte; overlong forms and surrogates are
// accepted as decoded (so values up to 0x1FFFFF can come out).
std::vector<uint32_t> decode_lenient(std::string_view text);

// Appends the UTF-8 form of `cpt` (1-4 bytes; surrogates are encoded like any other value).
// Values above 0x10FFFF append U+FFFD.
void append_utf8(std::string* out, uint32_t cpt);

// GPT-2's reversible byte <-> printable-unicode mapping: bytes '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF map to themselves, the other 68 bytes to U+0100.. in byte order.
const std::string& byte_to_unicode(uint8_t byte);  // UTF-8 of the mapped character
// Inverse for one character (UTF-8 bytes of a single codepoint); -1 when it is not a mapped one.
int unicode_to_byte(std::string_view ch);
// Byte-encodes every byte of `raw` (what byte-level BPE runs on).
std::string byte_encode(std::string_view raw);

// Replaces every occurrence of `from` (non-empty) by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace hinge::unicode

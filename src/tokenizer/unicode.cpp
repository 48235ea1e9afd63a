#include "tokenizer/unicode.h"

#include <array>

namespace hinge::unicode {

std::vector<uint32_t> decode_lenient(std::string_view s) {
  // Mirrors llama.cpp's unicode_cpt_from_utf8 + unicode_cpts_from_utf8.
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const size_t n = s.size();
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  auto cont = [&](size_t i) { return i < n && (b(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t c = b(i);
    if (!(c & 0x80)) {
      out.push_back(c);
      i += 1;
    } else if (!(c & 0x40)) {
      out.push_back(kReplacementChar);
      i += 1;
    } else if (!(c & 0x20)) {
      if (!cont(i + 1)) {
        out.push_back(kReplacementChar);
        i += 1;
        continue;
      }
      out.push_back(((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu));
      i += 2;
    } else if (!(c & 0x10)) {
      if (!cont(i + 1) || !cont(i + 2)) {
        out.push_back(kReplacementChar);
        i += 1;
        continue;
      }
      out.push_back(((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu));
      i += 3;
    } else if (!(c & 0x08)) {
      if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) {
        out.push_back(kReplacementChar);
        i += 1;
        continue;
      }
      out.push_back(((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) |
                    (b(i + 3) & 0x3Fu));
      i += 4;
    } else {
      out.push_back(kReplacementChar);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string* out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(out, kReplacementChar);
  }
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_cpt;  // codepoint (< 512) -> byte, or -1
  ByteTables() {
    from_cpt.fill(-1);
    auto self_mapped = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = self_mapped(b) ? static_cast<uint32_t>(b) : 256u + next++;
      append_utf8(&to_unicode[b], cpt);
      from_cpt[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables kTables;
  return kTables;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) {
  return byte_tables().to_unicode[byte];
}

int unicode_to_byte(std::string_view ch) {
  // Mapped characters are U+0021..U+0143: one or two UTF-8 bytes.
  uint32_t cpt;
  if (ch.size() == 1 && !(static_cast<uint8_t>(ch[0]) & 0x80)) {
    cpt = static_cast<uint8_t>(ch[0]);
  } else if (ch.size() == 2 && (static_cast<uint8_t>(ch[0]) & 0xE0) == 0xC0 &&
             (static_cast<uint8_t>(ch[1]) & 0xC0) == 0x80) {
    cpt = ((static_cast<uint8_t>(ch[0]) & 0x1Fu) << 6) | (static_cast<uint8_t>(ch[1]) & 0x3Fu);
  } else {
    return -1;
  }
  return cpt < 512 ? byte_tables().from_cpt[cpt] : -1;
}

std::string byte_encode(std::string_view raw) {
  const ByteTables& t = byte_tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += t.to_unicode[static_cast<uint8_t>(c)];
  return out;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace hinge::unicode

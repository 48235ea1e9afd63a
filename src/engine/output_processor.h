// Token ids -> the text a client may see, for one sample: streaming detokenization (only
// complete UTF-8 goes out), then stop strings (text that may still become one is held back; a
// match cuts the output right before it and ends the sample). The one implementation of it:
// the engine runs it when EngineConfig::detokenize is set (hinge run, hinge bench), the server
// runs it on each connection's strand (off the engine thread), so both turn tokens into text,
// and decide "stop", the same way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace hinge {

class OutputProcessor {
 public:
  // `last_prompt_token` (-1: none) is what the first output token's text may depend on.
  OutputProcessor(const Tokenizer& tokenizer, std::vector<std::string> stop,
                  int32_t last_prompt_token)
      : detok_(tokenizer), stops_(std::move(stop)) {
    if (last_prompt_token >= 0) detok_.push_context(last_prompt_token);
  }

  // The text of `token` that is safe to show now; nothing once stopped().
  std::string push(int32_t token) {
    if (stops_.stopped()) return {};
    return stops_.push(detok_.push(token));
  }
  // A stop string matched: the sample ends with finish reason "stop".
  bool stopped() const { return stops_.stopped(); }
  // At the end of the sample: what is still held back (nothing after a stop).
  std::string finish() {
    if (stops_.stopped()) return {};
    std::string text = stops_.push(detok_.flush());
    text += stops_.flush();
    return text;
  }

 private:
  StreamingDetokenizer detok_;
  StopMatcher stops_;
};

}  // namespace hinge

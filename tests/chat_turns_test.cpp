// Where a chat's turns start in its tokens (chat/chat_prompt.h chat_turns), with real
// vocabularies and real chat templates: every boundary found is exact (the tokens before it are
// the tokens of the render of the messages before it); a BPE vocabulary finds them all; the
// system prompt is what a shift keeps; a tokenizer that merges across a boundary (SPM's space
// prefix, special-token text without the tokens) yields fewer boundaries, never a wrong one; the message cap holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"
#include "chat/chat_prompt.h"

namespace hinge {
namespace {

using json = nlohmann::ordered_json;

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  auto file = gguf::GgufFile::open(testing::shared_path("vocab/" + name));
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  auto spec = Tokenizer::spec_from_gguf(**file);
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(*spec));
  return tok.ok() ? std::move(*tok) : nullptr;
}

ChatTemplate parse_template(const std::string& file) {
  return ChatTemplate::parse(testing::read_file(testing::shared_path("chat-templates/" + file)))
      .value();
}

json conversation(int turns) {
  json m = json::array();
  m.push_back({{"role", "system"}, {"content", "You are a helpful assistant who tells stories."}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", "Tell me story number " + std::to_string(i)}});
    m.push_back({{"role", "assistant"}, {"content", "Once upon a time, story " +
                                                        std::to_string(i) + " began."}});
  }
  m.push_back({{"role", "user"}, {"content", "And the last one?"}});
  return m;
}

// Every boundary is the token count of the render of some first k messages (less a closing
// EOS), which is a token prefix of the whole prompt.
void expect_exact(const ChatTemplate& t, const Tokenizer& tok, const json& messages,
                  const std::vector<int32_t>& ids, const ChatTurns& turns) {
  std::vector<int32_t> heads;
  json prefix = json::array();
  for (const auto& m : messages) {
    prefix.push_back(m);
    auto r = render_chat(t, tok, prefix, json(), false);
    if (!r.ok()) continue;
    std::string head = *r;  // (Phi-3 ends a conversation without a generation prompt with EOS)
    if (head.ends_with(eos_token_text(tok))) head.resize(head.size() - eos_token_text(tok).size());
    const std::vector<int32_t> h = encode_rendered_chat(tok, head);
    if (h.size() < ids.size() && std::equal(h.begin(), h.end(), ids.begin()))
      heads.push_back(static_cast<int32_t>(h.size()));
  }
  for (int32_t b : turns.turn_starts)
    EXPECT_NE(std::find(heads.begin(), heads.end(), b), heads.end()) << "boundary " << b;
  for (size_t i = 1; i < turns.turn_starts.size(); ++i)
    EXPECT_LT(turns.turn_starts[i - 1], turns.turn_starts[i]);
}

TEST(ChatTurns, BpeFindsEveryTurnAndTheSystemPrompt) {
  auto tok = load_vocab("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
                           "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"}) {
    SCOPED_TRACE(file);
    const ChatTemplate t = parse_template(file);
    const json messages = conversation(3);  // 8 messages
    const std::string text = render_chat(t, *tok, messages, json(), true).value();
    const std::vector<int32_t> ids = encode_rendered_chat(*tok, text);
    const ChatTurns turns = chat_turns(t, *tok, messages, json(), text, ids);
    // One boundary per message (the last one's end is where the reply's header starts).
    ASSERT_EQ(turns.turn_starts.size(), messages.size()) << file;
    expect_exact(t, *tok, messages, ids, turns);
    // The system prompt: its render's tokens.
    std::string sys = render_chat(t, *tok, json::array({messages[0]}), json(), false).value();
    if (sys.ends_with(eos_token_text(*tok))) sys.resize(sys.size() - eos_token_text(*tok).size());
    EXPECT_EQ(turns.keep_tokens, static_cast<int32_t>(encode_rendered_chat(*tok, sys).size()));
    EXPECT_EQ(turns.keep_tokens, turns.turn_starts[0]);
    EXPECT_LT(turns.turn_starts.back(), static_cast<int32_t>(ids.size()));
    // The cap: boundaries of the first 3 messages only.
    EXPECT_EQ(chat_turns(t, *tok, messages, json(), text, ids, 3).turn_starts,
              std::vector<int32_t>(turns.turn_starts.begin(), turns.turn_starts.begin() + 3));
  }
}

TEST(ChatTurns, NoSystemPromptKeepsNothing) {
  auto tok = load_vocab("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  const ChatTemplate t = parse_template("Qwen-Qwen2.5-7B-Instruct.jinja");
  json messages = conversation(2);
  messages.erase(messages.begin());
  const std::string text = render_chat(t, *tok, messages, json(), true).value();
  const std::vector<int32_t> ids = encode_rendered_chat(*tok, text);
  const ChatTurns turns = chat_turns(t, *tok, messages, json(), text, ids);
  EXPECT_EQ(turns.keep_tokens, 0);  // (Qwen adds its default system prompt: not the client's)
  EXPECT_EQ(turns.turn_starts.size(), messages.size());
  expect_exact(t, *tok, messages, ids, turns);
}

TEST(ChatTurns, SpmAndOddTemplatesGiveOnlyExactBoundaries) {
  auto tok = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                           "google-gemma-2-2b-it.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja"}) {
    SCOPED_TRACE(file);
    const ChatTemplate t = parse_template(file);
    json messages = conversation(3);
    if (std::string(file).find("gemma") != std::string::npos ||
        std::string(file).find("Mistral") != std::string::npos)
      messages.erase(messages.begin());  // they refuse or fold system messages
    auto r = render_chat(t, *tok, messages, json(), true);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const std::vector<int32_t> ids = encode_rendered_chat(*tok, *r);
    const ChatTurns turns = chat_turns(t, *tok, messages, json(), *r, ids);
    expect_exact(t, *tok, messages, ids, turns);
  }
  {
    // GPT-2 has no <|eot_id|> token: "<|eot_id|><|start_header_id|>" merges "|><|" across
    // each boundary but the first, where Llama 3.1's template has a newline.
    auto gpt2 = load_vocab("ggml-vocab-gpt-2.gguf");
    const ChatTemplate t = parse_template("meta-llama-Llama-3.1-8B-Instruct.jinja");
    const json messages = conversation(3);
    const std::string text = render_chat(t, *gpt2, messages, json(), true).value();
    const std::vector<int32_t> ids = encode_rendered_chat(*gpt2, text);
    const ChatTurns turns = chat_turns(t, *gpt2, messages, json(), text, ids);
    EXPECT_LT(turns.turn_starts.size(), messages.size());
    expect_exact(t, *gpt2, messages, ids, turns);
  }
  // Not an array, or a text the renders are no prefix of: nothing.
  const ChatTemplate t = parse_template("Qwen-Qwen2.5-7B-Instruct.jinja");
  const std::vector<int32_t> ids = tok->encode("hello", true, false);
  EXPECT_TRUE(chat_turns(t, *tok, json::object(), json(), "hello", ids).turn_starts.empty());
  EXPECT_TRUE(chat_turns(t, *tok, conversation(1), json(), "hello", ids).turn_starts.empty());
}

}  // namespace
}  // namespace hinge

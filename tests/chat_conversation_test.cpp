// A chat's conversation and its context policies (chat/conversation.h, chat/context_fit.h) with
// a real vocabulary and real chat templates: each prompt extends the token history exactly;
// the plain format; a template that refuses system messages; JSON round trip and its checks;
// error / shift / summarize at turn boundaries, the conversation untouched on error.
#include <gtest/gtest.h>

#include "chat/context_fit.h"
#include "chat/conversation.h"
#include "model_test_util.h"

namespace hinge::chat {
namespace {

using hinge::testing::load_or_die;
using hinge::testing::read_file;
using hinge::testing::shared_path;

class ChatConversation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = load_or_die(shared_path("models/stories260K.gguf")).release();
    tok_ = Tokenizer::create(model_->vocab).value().release();
  }
  static ChatTemplate parse(const std::string& file) {
    return ChatTemplate::parse(read_file(shared_path("chat-templates/" + file))).value();
  }
  // A reply as the engine would give it: tokens and their text.
  static std::pair<std::vector<int32_t>, std::string> reply(const std::string& text) {
    std::vector<int32_t> ids = tok_->encode(text, false, false);
    return {ids, text};
  }
  void add(Conversation& c, const std::string& user, const std::string& answer) {
    TurnPrompt p = c.prompt_with(user).value();
    auto [ids, text] = reply(answer);
    c.add_turn(user, std::move(p), ids, text);
  }
  static LoadedModel* model_;
  static Tokenizer* tok_;
};
LoadedModel* ChatConversation::model_ = nullptr;
Tokenizer* ChatConversation::tok_ = nullptr;

TEST_F(ChatConversation, EachPromptExtendsTheHistoryWithATemplate) {
  const ChatTemplate t = parse("Qwen-Qwen2.5-7B-Instruct.jinja");
  Conversation c(tok_, &t, "You tell stories.");
  TurnPrompt p1 = c.prompt_with("Tell me about a cat").value();
  EXPECT_EQ(p1.reused_tokens, 0);
  EXPECT_NE(p1.text.find("<|im_start|>system\nYou tell stories.<|im_end|>"), std::string::npos);
  EXPECT_EQ(p1.text.substr(p1.text.size() - 22), "<|im_start|>assistant\n");
  add(c, "Tell me about a cat", "The cat was big.");
  for (const char* next : {"What did it eat?", "Where did it sleep?"}) {
    const std::vector<int32_t> history = c.history();
    TurnPrompt p = c.prompt_with(next).value();
    ASSERT_GT(p.tokens.size(), history.size());
    EXPECT_EQ(p.reused_tokens, static_cast<int32_t>(history.size()));
    EXPECT_TRUE(std::equal(history.begin(), history.end(), p.tokens.begin()));
    add(c, next, "It ate fish.");
  }
  EXPECT_EQ(c.num_turns(), 3);
}

TEST_F(ChatConversation, TurnStartsOfAPromptAreExactTokenBoundaries) {
  const ChatTemplate t = parse("Qwen-Qwen2.5-7B-Instruct.jinja");
  Conversation c(tok_, &t, "You tell stories.");
  add(c, "Tell me about a cat", "The cat was big.");
  add(c, "What did it eat?", "It ate fish.");
  const TurnPrompt p = c.prompt_with("Where did it sleep?").value();
  const std::vector<int32_t> starts = c.turn_starts("Where did it sleep?", p);
  // system, 2 x (user, assistant), user: up to 5 boundaries after the first message.
  ASSERT_FALSE(starts.empty());
  EXPECT_LE(starts.size(), 5u);
  for (size_t i = 0; i < starts.size(); ++i) {
    EXPECT_GT(starts[i], i == 0 ? 0 : starts[i - 1]);
    EXPECT_LE(starts[i], static_cast<int32_t>(p.tokens.size()));
    // Each is where a message's header starts in the text the tokens up to it decode to.
    const std::string before = tok_->decode(std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + starts[i]));
    ASSERT_GE(before.size(), 12u);
    EXPECT_NE(before.find("<|im_end|>", before.size() - 12), std::string::npos)
        << before;
  }
  // The plain format has no messages to find.
  Conversation plain(tok_, nullptr);
  const TurnPrompt q = plain.prompt_with("Once upon a time").value();
  EXPECT_TRUE(plain.turn_starts("Once upon a time", q).empty());
}

TEST_F(ChatConversation, PlainFormatIsLinesAndReuses) {
  Conversation c(tok_, nullptr);
  TurnPrompt p = c.prompt_with("Once upon a time").value();
  EXPECT_EQ(p.text, "Once upon a time\n");
  EXPECT_EQ(p.tokens.front(), tok_->bos());
  add(c, "Once upon a time", "there was a dog.");
  p = c.prompt_with("The end").value();
  EXPECT_EQ(p.text, "Once upon a time\nthere was a dog.\nThe end\n");
  EXPECT_EQ(p.reused_tokens, static_cast<int32_t>(c.history().size()));
}

TEST_F(ChatConversation, TemplateWithoutSystemRoleGetsTheHeadInTheFirstUserMessage) {
  const ChatTemplate t = parse("google-gemma-2-2b-it.jinja");
  Conversation c(tok_, &t, "Be brief.");
  TurnPrompt p = c.prompt_with("Hello").value();
  EXPECT_NE(p.text.find("<start_of_turn>user\nBe brief.\n\nHello<end_of_turn>"), std::string::npos)
      << p.text;
}

TEST_F(ChatConversation, JsonRoundTripAndChecks) {
  Conversation c(tok_, nullptr, "sys");
  add(c, "a", "b");
  c.summarize_oldest(0, "so far");
  add(c, "c", "d");
  const nlohmann::ordered_json j = c.to_json();
  Conversation back(tok_, nullptr);
  ASSERT_TRUE(back.load_json(j).ok());
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.history(), c.history());
  EXPECT_EQ(back.prompt_with("e").value().tokens, c.prompt_with("e").value().tokens);
  auto bad = j;
  bad["history"].push_back(100000);
  Status st = back.load_json(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos);
  bad = j;
  bad["turns"][0] = "x";
  EXPECT_FALSE(back.load_json(bad).ok());
  bad = j;
  bad["format"] = 2;
  EXPECT_FALSE(back.load_json(bad).ok());
  EXPECT_EQ(back.to_json(), j);  // a failed load changes nothing
}

TEST_F(ChatConversation, PoliciesActAtTurnBoundaries) {
  const std::string answer = "The little dog ran to the park and played with a big red ball.";
  auto build = [&] {
    Conversation c(tok_, nullptr, "A story.");
    for (int i = 0; i < 6; ++i) add(c, "And then what happened next?", answer);
    return c;
  };
  const int32_t full = static_cast<int32_t>(build().prompt_with("More").value().tokens.size());
  FitConfig fc;
  fc.context = full - 10;  // the next turn does not fit
  fc.reply_reserve = 20;
  fc.summary_tokens = 16;
  int summaries = 0;
  Summarizer summarize = [&](const TurnPrompt& p, int32_t max_tokens) -> StatusOr<std::string> {
    ++summaries;
    EXPECT_NE(p.text.find(fc.summary_instruction), std::string::npos);
    EXPECT_LE(static_cast<int64_t>(p.tokens.size()) + max_tokens, fc.context);
    return std::string("A dog played.");
  };
  FitReport report;

  Conversation c = build();
  fc.policy = ChatContextPolicy::kError;
  auto r = fit_turn(&c, "More", fc, summarize, &report);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--context-policy shift or summarize"), std::string::npos);
  EXPECT_EQ(c.num_turns(), 6);

  fc.policy = ChatContextPolicy::kShift;
  r = fit_turn(&c, "More", fc, summarize, &report);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(report.dropped_turns, 1);
  EXPECT_EQ(c.num_turns(), 6 - report.dropped_turns);
  EXPECT_LE(static_cast<int64_t>(r->tokens.size()) + fc.reply_reserve, fc.context);
  EXPECT_EQ(r->text.rfind("A story.\n", 0), 0u);  // the system prompt stays
  EXPECT_EQ(summaries, 0);

  c = build();
  fc.policy = ChatContextPolicy::kSummarize;
  r = fit_turn(&c, "More", fc, summarize, &report);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(summaries, 1);
  EXPECT_GE(report.summarized_turns, 1);
  EXPECT_EQ(c.summary(), "A dog played.");
  EXPECT_NE(r->text.find("Summary of the conversation so far: A dog played."), std::string::npos);
  EXPECT_EQ(c.num_turns(), 6 - report.summarized_turns - report.dropped_turns);

  // A message that cannot fit even alone is refused, the conversation untouched.
  c = build();
  const std::string huge(fc.context * 8, 'a');
  r = fit_turn(&c, huge, fc, summarize, &report);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("this message alone"), std::string::npos);
  EXPECT_EQ(c.num_turns(), 6);
  EXPECT_TRUE(c.summary().empty());
}

}  // namespace
}  // namespace hinge::chat

// The state of one `hinge chat` process, shared by its parts: cmd_chat.cpp (set-up, the
// read-reply loop, replies) and chat_sessions.cpp (/save, /load, /logout).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "chat/context_fit.h"
#include "chat/conversation.h"
#include "chat/session_file.h"
#include "chat/session_store.h"
#include "cli/commands.h"
#include "hinge/engine.h"
#include "pressure/reply_shedder.h"
#include "model/loaded_model.h"
#include "tokenizer/tokenizer.h"

namespace hinge::cli {

struct ChatApp {
  const ChatArgs& args;
  const LoadedModel& model;
  const Tokenizer& tok;
  Engine& engine;
  chat::Conversation conv;
  chat::FitConfig fit;
  chat::SessionStore store;
  chat::SessionLayout layout;   // this engine's (what a saved session must match)
  chat::KdfLimits kdf;          // Argon2id cost of new files
  std::optional<chat::SessionKeyring> keys;  // once a passphrase or key file is known
  std::set<std::string> files;  // session files saved or loaded by this process
  ReplyShedder* shedder = nullptr;  // memory pressure: caps or ends the reply in flight
};

// Prints "hinge: message" on stderr (a failed command; the chat goes on).
void chat_error(const std::string& message);
// The session commands; each reports what it did or why not, and the chat goes on.
void save_session(ChatApp& app, const std::string& name);
void load_session(ChatApp& app, const std::string& name);
// Deletes the session files (those of this process and every other one the key opens), zeroes
// the KV cache, destroys the key, forgets the conversation.
void logout(ChatApp& app);

}  // namespace hinge::cli

// `hinge chat`'s /save, /load and /logout: encrypted session files (chat/session_file.h) with
// the conversation and its KV blocks (Engine::export_prefix_kv / import_prefix_kv).
#include <sodium.h>
#include <sys/stat.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli/chat_app.h"
#include "cli/terminal_input.h"
#include "common/units.h"

namespace hinge::cli {

namespace {

void zero(std::string& s) {
  sodium_memzero(s.data(), s.size());
  s.clear();
}
void zero(std::vector<uint8_t>& v) {
  sodium_memzero(v.data(), v.size());
  v.clear();
}

// The keyring, asking for the passphrase the first time (twice when it will encrypt a new file
// on a terminal).
Status ensure_keys(ChatApp& app, bool confirm) {
  if (app.keys) return Status::Ok();
  if (!app.args.key_file.empty()) {
    HINGE_ASSIGN_OR_RETURN(chat::SessionKeyring k,
                           chat::SessionKeyring::from_key_file(app.args.key_file));
    app.keys.emplace(std::move(k));
    return Status::Ok();
  }
  std::optional<std::string> pass = read_secret("passphrase for saved sessions: ");
  if (!pass || pass->empty()) return Status::Error("no passphrase given; nothing was saved or loaded");
  if (confirm && stdin_is_terminal()) {
    std::optional<std::string> again = read_secret("repeat the passphrase: ");
    const bool same = again && again->size() == pass->size() &&
                      sodium_memcmp(again->data(), pass->data(), pass->size()) == 0;
    if (again) zero(*again);
    if (!same) {
      zero(*pass);
      return Status::Error("the passphrases differ; nothing was saved");
    }
  }
  auto k = chat::SessionKeyring::from_passphrase(*pass, app.kdf);
  zero(*pass);
  if (!k.ok()) return k.status();
  app.keys.emplace(std::move(k).value());
  return Status::Ok();
}

std::string names_in(const chat::SessionStore& store) {
  std::string out;
  for (const std::string& path : store.list()) {
    std::string name = path.substr(store.dir().size() + 1);
    name.resize(name.size() - std::string(".session").size());
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

void chat_error(const std::string& message) {
  std::fprintf(stderr, "hinge: %s\n", message.c_str());
  std::fflush(stderr);
}

void save_session(ChatApp& app, const std::string& name) {
  auto path = app.store.path_for(name);
  if (!path.ok()) return chat_error("/save: " + path.status().message());
  if (Status st = app.store.ensure_dir(); !st.ok()) return chat_error("/save: " + st.message());
  if (Status st = ensure_keys(app, /*confirm=*/true); !st.ok())
    return chat_error("/save: " + st.message());
  std::vector<uint8_t> kv;
  int32_t blocks = 0;
  if (!app.args.no_session_kv && !app.conv.history().empty()) {
    auto n = app.engine.export_prefix_kv(app.conv.history(), CacheScope{}, &kv);
    if (n.ok()) {
      blocks = *n;
    } else {
      chat_error("/save: " + n.status().message());
      kv.clear();
    }
  }
  nlohmann::ordered_json j = app.conv.to_json();
  j["kv_blocks"] = blocks;
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const Status st = chat::write_session_file(*path, *app.keys, app.layout, text, kv);
  zero(text);
  const size_t kv_bytes = kv.size();
  zero(kv);
  if (!st.ok()) return chat_error("/save: " + st.message());
  app.files.insert(*path);
  std::fprintf(stderr, "saved session '%s' (encrypted): %d turns, %zu tokens, %d KV blocks (%s) in %s\n",
               name.c_str(), app.conv.num_turns(), app.conv.history().size(), blocks,
               format_bytes(kv_bytes).c_str(), path->c_str());
}

void load_session(ChatApp& app, const std::string& name) {
  auto path = app.store.path_for(name);
  if (!path.ok()) return chat_error("/load: " + path.status().message());
  struct stat sb{};
  if (::stat(path->c_str(), &sb) != 0)
    return chat_error(fmt::format("/load: no session '{}' in {} (saved sessions: {})", name,
                                  app.store.dir(), names_in(app.store)));
  if (Status st = ensure_keys(app, /*confirm=*/false); !st.ok())
    return chat_error("/load: " + st.message());
  chat::SessionOpenResult r = chat::read_session_file(*path, *app.keys, app.layout);
  if (r.error != chat::SessionOpenError::kNone) {
    // A wrong passphrase is forgotten, so the next attempt asks again.
    if (r.error == chat::SessionOpenError::kWrongKey && app.args.key_file.empty()) app.keys.reset();
    return chat_error("/load: " + r.status.message());
  }
  auto j = nlohmann::ordered_json::parse(r.contents.conversation, nullptr, false);
  zero(r.contents.conversation);
  Status st = j.is_discarded() ? Status::Error("the conversation is not valid JSON")
                               : app.conv.load_json(j);
  int64_t blocks = 0;
  if (st.ok() && (!j.contains("kv_blocks") || !j["kv_blocks"].is_number_integer() ||
                  (blocks = j["kv_blocks"].get<int64_t>()) < 0))
    st = Status::Error("'kv_blocks' must be a count");
  j = nullptr;
  if (!st.ok()) {
    zero(r.contents.kv);
    return chat_error(fmt::format("/load: {}: {}", *path, st.message()));
  }
  int32_t restored = 0;
  if (!r.contents.kv.empty()) {
    auto n = app.engine.import_prefix_kv(app.conv.history(), CacheScope{}, r.contents.kv);
    if (n.ok()) restored = *n;
    else chat_error("/load: the KV blocks were not restored (" + n.status().message() + ")");
  }
  zero(r.contents.kv);
  app.files.insert(*path);
  for (const chat::Turn& t : app.conv.turns())
    std::fprintf(stdout, "> %s\n%s\n", t.user.c_str(), t.assistant.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "loaded session '%s': %d turns, %zu tokens, %d of %lld KV blocks restored\n",
               name.c_str(), app.conv.num_turns(), app.conv.history().size(), restored,
               static_cast<long long>(blocks));
}

void logout(ChatApp& app) {
  // Files saved by earlier processes are found by the key: ask for it when none is known yet
  // (an empty passphrase skips them).
  if (!app.keys && !app.store.list().empty()) {
    if (Status st = ensure_keys(app, /*confirm=*/false); !st.ok())
      chat_error("/logout: no key, so only this process's files are deleted");
  }
  std::set<std::string> doomed = app.files;
  if (app.keys)
    for (const std::string& path : app.store.list())
      if (chat::session_key_matches(path, *app.keys)) doomed.insert(path);
  int deleted = 0;
  for (const std::string& path : doomed) {
    struct stat sb{};
    if (::stat(path.c_str(), &sb) != 0) continue;  // already gone
    if (Status st = chat::shred_file(path); st.ok()) ++deleted;
    else chat_error("/logout: " + st.message());
  }
  app.files.clear();
  const int64_t zeroed = app.engine.wipe_kv_cache();
  if (app.keys) app.keys->destroy();
  app.keys.reset();
  app.conv.reset();
  std::fprintf(stderr,
               "logged out: deleted %d session file%s, zeroed %s of KV cache, key destroyed\n",
               deleted, deleted == 1 ? "" : "s", format_bytes(static_cast<uint64_t>(zeroed)).c_str());
}

}  // namespace hinge::cli

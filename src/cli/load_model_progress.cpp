#include "cli/progress_bar.h"
#include "cli/commands.h"

#include <algorithm>
#include <cstdio>

namespace hinge::cli {

StatusOr<std::unique_ptr<LoadedModel>> load_model_with_progress(const std::string& model,
                                                                 const std::string& tokenizer) {
  ProgressBar bar("loading");
  LoadOptions opts;
  opts.tokenizer_path = tokenizer;
  opts.progress = [&](double f) { bar.update(f); };
  return load_model(model, opts);
}

StatusOr<std::unique_ptr<LoadedModel>> load_draft_model(const std::string& path,
                                                        const LoadedModel& target) {
  std::fprintf(stderr, "hinge: loading the draft model %s\n", path.c_str());
  auto m = load_model_with_progress(path, "");
  if (!m.ok()) return Status::Errorf("--draft-model {}: {}", path, m.status().message());
  const LoadedModel& d = **m;
  if (d.config.n_vocab != target.config.n_vocab)
    return Status::Errorf(
        "--draft-model {}: its vocabulary has {} tokens, the model's {}; a draft model must "
        "share the model's vocabulary (a smaller model of the same family and tokenizer)",
        path, d.config.n_vocab, target.config.n_vocab);
  // Both with their vocabularies: the same pieces (ids of the same size that mean other text
  // would draft nonsense, never accepted).
  const auto& a = d.vocab.tokens;
  const auto& b = target.vocab.tokens;
  if (!a.empty() && !b.empty()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (a[i] != b[i])
        return Status::Errorf(
            "--draft-model {}: token {} differs from the model's: a draft model must share the "
            "model's vocabulary (the same tokenizer)",
            path, i);
  }
  return m;
}

Status attach_draft_model(const std::string& path, const LoadedModel& target,
                          EngineConfig* config, std::unique_ptr<LoadedModel>* holder) {
  if (config->spec_mode != SpecMode::kDraft) return Status::Ok();
  HINGE_ASSIGN_OR_RETURN(*holder, load_draft_model(path, target));
  config->draft_model = holder->get();
  return Status::Ok();
}

}  // namespace hinge::cli

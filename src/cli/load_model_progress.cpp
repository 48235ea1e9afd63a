#include "cli/progress_bar.h"
#include "cli/commands.h"

namespace hinge::cli {

StatusOr<std::unique_ptr<LoadedModel>> load_model_with_progress(const std::string& model,
                                                                 const std::string& tokenizer) {
  ProgressBar bar("loading");
  LoadOptions opts;
  opts.tokenizer_path = tokenizer;
  opts.progress = [&](double f) { bar.update(f); };
  return load_model(model, opts);
}

}  // namespace hinge::cli

// Transformer::forward_batch validates its input before touching the arena (issue 13, third
// trap): every block id of every sequence's block table must be in [0, arena.num_blocks()),
// as every slot must be in the arena; an id outside is a clear error, not a read out of bounds.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "model/kv_cache.h"
#include "model/transformer.h"
#include "model_test_util.h"

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

class ForwardBatchValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = load_or_die(shared_path("models/stories260K.gguf"));
    ASSERT_TRUE(model_);
    pool_ = std::make_unique<ThreadPool>(1);
    llama_ = std::make_unique<Transformer>(model_->config, model_->weights, *pool_, 16);
    const kv::KvSpec spec = kv_spec_for(model_->config, kv::KvDtype::kF32, kv::KvDtype::kF32, 4);
    arena_.emplace(std::move(kv::KvArena::create(spec, kBlocks)).value());
    logits_.resize(static_cast<size_t>(model_->config.n_vocab));
  }

  // Six tokens of one sequence at positions 0..5 in blocks `table` (block size 4); the slots
  // are those of blocks 2 and 3, always in the arena.
  Status run(std::vector<int32_t> table) {
    const int32_t tokens[6] = {1, 20, 30, 40, 50, 60};
    const int64_t slots[6] = {8, 9, 10, 11, 12, 13};
    const int32_t rows[1] = {5};
    kernels::AttentionSeq seq;
    seq.query_begin = 0;
    seq.num_queries = 6;
    seq.first_position = 0;
    seq.block_table = table.data();
    seq.num_blocks = static_cast<int32_t>(table.size());
    ForwardBatch b;
    b.token_ids = tokens;
    b.slot_mapping = slots;
    b.seqs = {&seq, 1};
    b.logit_rows = rows;
    return llama_->forward_batch(b, *arena_, logits_.data());
  }

  static constexpr int64_t kBlocks = 8;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Transformer> llama_;
  std::optional<kv::KvArena> arena_;
  std::vector<float> logits_;
};

TEST_F(ForwardBatchValidation, BlockTableIdsInTheArenaRun) {
  const Status st = run({2, 3});
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_F(ForwardBatchValidation, BlockTableIdOutsideTheArenaIsAnError) {
  for (const int32_t bad : {static_cast<int32_t>(kBlocks), -1, 1 << 20,
                            std::numeric_limits<int32_t>::max()}) {
    const Status st = run({2, bad});
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("block"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("outside the arena"), std::string::npos) << st.message();
  }
  // The first entry too, and extra entries past what the positions need (all are read as
  // the sequence's table).
  EXPECT_FALSE(run({static_cast<int32_t>(kBlocks), 3}).ok());
  EXPECT_FALSE(run({2, 3, -5}).ok());
  // A valid batch still runs afterwards.
  EXPECT_TRUE(run({2, 3}).ok());
}

}  // namespace
}  // namespace hinge

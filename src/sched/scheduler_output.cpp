#include "sched/scheduler_output.h"

namespace hinge::sched {

void SchedulerOutput::clear() {
  scheduled.clear();
  block_copies.clear();
  preempted.clear();
  finished.clear();
  num_scheduled_tokens = 0;
  all_token_ids.clear();
  all_slots.clear();
  all_block_ids.clear();
  all_sample_ids.clear();
  all_block_offsets.clear();
}

}  // namespace hinge::sched

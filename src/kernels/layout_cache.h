// The weight layouts calibrated on this CPU (kernel_choice.h), kept across processes.
//
// Calibration times each candidate layout for a few milliseconds. On a busy machine two
// processes can time them differently and pick different layouts: `hinge run` and `hinge
// serve` started side by side then hold different weight copies, and a memory budget sized by
// one does not fit the other. So the first process that calibrates a type writes its choice to
//
//   <cache folder>/layouts-<hash of the CPU label>.json      (common/cache_dir.h)
//
// and every later process on the machine reads it. The file names the CPU label and the build
// (common/cache_dir.h build_identity(): kernels change with the code); a file for another CPU
// or build, or a damaged one, is ignored and replaced. An entry holds for one type and one
// candidate set (the HINGE_DISABLE_* switches change the set, and with it the entry).
// Calibrating and writing happen under a lock file beside it, so processes that start
// together calibrate once. HINGE_MACHINE_PROFILE=off keeps everything in memory, per process;
// `hinge bench --layouts` measures again and rewrites the entries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/kernel_choice.h"

namespace hinge::kernels {

bool layout_cache_enabled();       // false with HINGE_MACHINE_PROFILE=off or no cache folder
std::string layout_cache_path();   // "" when disabled

// The cached choice for `type` among `candidates` (in candidate_layouts() order), if the file
// is this CPU's and this build's and names a layout among them; its reason says "cached".
std::optional<LayoutChoice> load_cached_layout(GgmlType type,
                                               const std::vector<WeightLayout>& candidates);

// Adds (or replaces) the entry for c.type and `candidates`, keeping the file's other entries
// when it is this CPU's and build's.
Status save_cached_layout(const LayoutChoice& c, const std::vector<WeightLayout>& candidates);

}  // namespace hinge::kernels

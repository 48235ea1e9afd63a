// The 64-byte operand of ldtilecfg (palette 1): bytes per row and rows of each of the 16 tile
// registers; unused tiles stay 0. Shared by the AMX-INT8 and AMX-BF16 kernels.
#pragma once

#include <cstdint>

namespace hinge::kernels {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace hinge::kernels

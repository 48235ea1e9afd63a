// The machine's multiply-add peak per instruction family, measured, with the threads given:
// `hinge bench --compute`, and the denominator of every "% of peak" hinge prints.
//
// Each family runs a register-only loop on every pool thread: enough independent accumulators
// to cover the instruction's latency on any core we know (12 vector chains; 4 tile products of
// 2 x 2 tiles for AMX), no loads, no stores. The loop is sized to take about `seconds` per
// pass; the best of 3 passes is the peak (a peak is what the unit can do, not its median).
// Ops count 2 per multiply-add, summed over the threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hinge {
class ThreadPool;
}

namespace hinge::roofline {

enum class PeakFamily : uint8_t {
  kAmxInt8,
  kAmxBf16,
  kAvx512Vnni,
  kAvx512Bf16,
  kAvx512Fma,
  kAvx2Int8,
  kAvx2Fma
};

struct PeakFamilyInfo {
  PeakFamily family;
  const char* name;        // "amx-int8": the key in JSON and the machine profile
  const char* instruction; // "tdpbssd"
  bool integer;            // int8 products (the quantized weights' kernels) or floating point
  int32_t macs_per_op;     // multiply-adds of one instruction
};
const std::vector<PeakFamilyInfo>& all_peak_families();
const PeakFamilyInfo* peak_family_by_name(const std::string& name);
const PeakFamilyInfo& peak_family_info(PeakFamily family);

// Whether this CPU and OS can run the family (CPUID, XCR0, the AMX tile permission), regardless
// of the HINGE_DISABLE_* switches.
bool cpu_has_family(PeakFamily family);
// The families cpu_has_family() accepts, in all_peak_families() order.
std::vector<PeakFamily> available_peak_families();

struct ComputePeak {
  PeakFamily family;
  double ops_per_s = 0;  // 2 per multiply-add, all threads together
  int32_t threads = 0;
};

// Measures every available family. seconds: per pass (3 passes per family), at least 1 ms.
std::vector<ComputePeak> measure_compute_peaks(ThreadPool& pool, double seconds = 0.04);

// One family, for tests and for the profile's single entries.
ComputePeak measure_compute_peak(ThreadPool& pool, PeakFamily family, double seconds = 0.04);

}  // namespace hinge::roofline

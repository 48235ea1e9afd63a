// The memory-pressure flags `serve`, `run` and `chat` share (--no-pressure, --pressure-root,
// --pressure-interval, --pressure-cooldown, --pressure-max-tokens) and their checks.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "pressure/pressure_watch.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hinge::cli {

struct PressureArgs {
  bool no_pressure = false;        // --no-pressure: no watch, the level stays normal
  std::string root = "/";          // --pressure-root DIR: read /proc and /sys under DIR
  double interval = 1;             // seconds between readings
  double cooldown = 10;            // seconds below the release line before a level falls
  int64_t max_tokens = 256;        // cap on max_tokens (serve: new requests; run/chat: the reply)
};

// `what_is_capped` ends --pressure-max-tokens's help ("new requests' max_tokens", "a reply").
void add_pressure_options(CLI::App* app, PressureArgs* args, const char* what_is_capped);
Status check_pressure_args(const PressureArgs& a);
pressure::PressureWatchConfig pressure_watch_config(const PressureArgs& a);

}  // namespace hinge::cli

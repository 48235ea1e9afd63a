#include "cli/pressure_options.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>

namespace hinge::cli {

void add_pressure_options(CLI::App* app, PressureArgs* args, const char* what_is_capped) {
  app->add_flag("--no-pressure", args->no_pressure,
                "Do not watch memory pressure and temperature (PSI, cgroup v2, thermal zones); "
                "the level stays normal");
  app->add_option("--pressure-root", args->root,
                  "Read the pressure files (proc/pressure/*, the cgroup's memory.*, "
                  "sys/class/thermal) under this directory instead of / (tests inject "
                  "readings); the cgroup memory limit is read there too")
      ->capture_default_str();
  app->add_option("--pressure-interval", args->interval, "Seconds between pressure readings")
      ->capture_default_str();
  app->add_option("--pressure-cooldown", args->cooldown,
                  "Seconds every signal must stay below 80% of its threshold before the "
                  "pressure level falls")
      ->capture_default_str();
  app->add_option("--pressure-max-tokens", args->max_tokens,
                  std::string("Under elevated pressure (or critical, for serve), the most tokens "
                              "of ") + what_is_capped + " (0: no cap)")
      ->capture_default_str();
}

Status check_pressure_args(const PressureArgs& a) {
  if (!(a.interval >= 0.01 && a.interval <= 3600))
    return Status::Errorf("--pressure-interval must be in [0.01, 3600] seconds, got {}",
                          a.interval);
  if (!(a.cooldown >= 0 && a.cooldown <= 86400))
    return Status::Errorf("--pressure-cooldown must be in [0, 86400] seconds, got {}", a.cooldown);
  if (a.max_tokens < 0 || a.max_tokens > INT32_MAX)
    return Status::Errorf("--pressure-max-tokens must be >= 0, got {}", a.max_tokens);
  if (!a.no_pressure && !std::filesystem::is_directory(a.root))
    return Status::Errorf("--pressure-root {}: not a directory", a.root);
  return Status::Ok();
}

pressure::PressureWatchConfig pressure_watch_config(const PressureArgs& a) {
  pressure::PressureWatchConfig wc;
  wc.root = a.root;
  wc.interval_s = a.interval;
  wc.thresholds.cooldown_s = a.cooldown;
  return wc;
}

}  // namespace hinge::cli

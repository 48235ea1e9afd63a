// `hinge route --backend URL ...`: starts the router (route/router.h) and serves until SIGINT /
// SIGTERM.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "route/router.h"

namespace hinge::cli {

int route_command(const RouteArgs& args) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  route::RouteConfig c;
  c.backends = args.backends;
  c.host = args.host;
  c.port = static_cast<uint16_t>(args.port);
  c.policy = args.policy;
  c.prefix_weight = args.prefix_weight;
  c.queue_weight = args.queue_weight;
  c.kv_weight = args.kv_weight;
  c.poll_interval_s = args.poll_interval;
  c.connect_timeout_s = args.connect_timeout;
  c.workers = static_cast<int32_t>(args.workers);
  c.quiet = args.quiet;
  if (!args.backend_api_key_file.empty()) {
    std::ifstream in(args.backend_api_key_file);
    if (!in) {
      std::fprintf(stderr, "hinge route: --backend-api-key-file %s: cannot read it\n",
                   args.backend_api_key_file.c_str());
      return 1;
    }
    std::getline(in, c.backend_api_key);
    while (!c.backend_api_key.empty() && (c.backend_api_key.back() == '\r' || c.backend_api_key.back() == ' '))
      c.backend_api_key.pop_back();
  }
  auto router = route::Router::start(c);
  if (!router.ok()) {
    std::fprintf(stderr, "hinge route: %s\n", router.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "hinge route: %zu replicas, policy %s\n", c.backends.size(), c.policy.c_str());
  std::printf("hinge route: serving on %s\n", (*router)->url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "hinge route: stopping\n");
  (*router)->stop();
  return 0;
}

}  // namespace hinge::cli

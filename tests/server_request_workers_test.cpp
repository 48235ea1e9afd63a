// server/request_workers.h: bounded queue, generation first, bulk work never holds every worker.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "server/request_workers.h"

namespace hinge::server {
namespace {

using namespace std::chrono_literals;

TEST(RequestWorkers, BulkTasksLeaveAWorkerForGeneration) {
  // Declared before the workers: their destructor runs the queued bulk tasks, which use these.
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> bulk_started{0};
  std::promise<void> first_bulk;
  RequestWorkers w(2, 16);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(w.submit(
        [&, gate] {
          if (++bulk_started == 1) first_bulk.set_value();
          gate.wait();
        },
        RequestWorkers::Kind::kBulk));
  ASSERT_EQ(first_bulk.get_future().wait_for(5s), std::future_status::ready);
  // Bulk tasks 2 and 3 are queued ahead of it: it runs only if they may not take the second
  // worker (threads - 1 = 1 bulk task at a time).
  std::promise<void> ran;
  ASSERT_TRUE(w.submit([&] { ran.set_value(); }));
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(bulk_started.load(), 1);
  release.set_value();
}

TEST(RequestWorkers, QueueIsBoundedAndDrainsOnDestruction) {
  std::atomic<int> done{0};
  {
    RequestWorkers w(1, 3);
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    std::promise<void> held;
    ASSERT_TRUE(w.submit([gate, &held] {
      held.set_value();
      gate.wait();
    }));
    ASSERT_EQ(held.get_future().wait_for(5s), std::future_status::ready);  // the worker holds it
    int accepted = 0;
    for (int i = 0; i < 5; ++i) accepted += w.submit([&] { ++done; }) ? 1 : 0;
    EXPECT_EQ(accepted, 3);
    EXPECT_EQ(w.queued(), 3);
    release.set_value();
  }
  EXPECT_EQ(done.load(), 3);  // what was queued ran before the join
}

TEST(RequestWorkers, AnEscapingExceptionDoesNotStopTheWorker) {
  RequestWorkers w(1, 4);
  ASSERT_TRUE(w.submit([] { throw std::runtime_error("boom"); }));
  std::promise<void> ran;
  ASSERT_TRUE(w.submit([&] { ran.set_value(); }));
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
}

}  // namespace
}  // namespace hinge::server

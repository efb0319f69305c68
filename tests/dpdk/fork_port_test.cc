// A DpdkPort in a process forked from the one that opened it: destroying it
// there must leave the port to its opener (drivers/dpdk/dpdk_io.h, close()).
// uroce's libibverbs keeps its port open across fork() (qperf's server forks
// one process per test), and every forked child destroys its copy at exit.
// EAL's memory is shared with the child (with --no-huge a MAP_SHARED memfd,
// hugepages are MAP_SHARED too), and with it the ethdev data, the PMD's
// queues and the mbuf pool: a child that stopped, closed and removed the port
// and freed its pool took them from under the parent, whose engine thread
// still polled them (verbs_fork_exit: SIGSEGV under load). One process and a
// net_null port, under 1 s.
#include <sys/wait.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdio>
#include <memory>

#include <gtest/gtest.h>
#include <uroce/eal.h>

#include "drivers/dpdk/dpdk_io.h"

namespace uroce {
namespace {

// Frames net_null makes out of the port's pool, sent back out: how many went each way.
std::pair<uint16_t, uint16_t> rx_then_tx(dpdk::DpdkQueue& q) {
  rte_mbuf* m[32];
  const uint16_t rx = q.rx_burst(m, 32);
  const uint16_t tx = q.tx_burst(m, rx);
  if (tx < rx) rte_pktmbuf_free_bulk(m + tx, rx - tx);
  return {rx, tx};
}

TEST(DpdkPort, ForkedChildThatDestroysItsCopyLeavesThePortToItsOpener) {
  ASSERT_TRUE(init_eal().ok());
  dpdk::DpdkPortConfig pc;
  pc.device = "net_null_fork0";
  pc.link_timeout_ms = 0;
  auto opened = dpdk::DpdkPort::open(pc);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<dpdk::DpdkPort> port = std::move(opened).value();
  const uint16_t id = port->info().port_id;
  const auto before = rx_then_tx(port->queue(0));
  ASSERT_EQ(before.first, 32);
  ASSERT_EQ(before.second, 32);

  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: uses the port, then destroys its copy, as the verbs provider does at exit
    const auto used = rx_then_tx(port->queue(0));
    port.reset();
    _exit(used.first == 32 && used.second == 32 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  // Expect: the opener's port is still open and started, its queues and pool
  // whole: it receives and sends as before the fork.
  rte_eth_link link{};
  EXPECT_EQ(rte_eth_link_get_nowait(id, &link), 0);
  EXPECT_EQ(link.link_status, RTE_ETH_LINK_UP);
  const auto after = rx_then_tx(port->queue(0));
  EXPECT_EQ(after.first, 32);
  EXPECT_EQ(after.second, 32);

  // The opener closes it: the device it probed is gone.
  port.reset();
  EXPECT_FALSE(rte_eth_dev_is_valid_port(id));
}

}  // namespace
}  // namespace uroce

# The fabric and congestion-control parameters of the CC report
# (tests/cc/report.sh) and of the sim suite's CC test (tests/sim/cc_incast.sh):
# one place, so the test checks what the report shows. Sourced by bash.
# Why each value: docs/CC.md, "Set-up".

# 100 Gb/s links, 1 us host-switch propagation, 16 MiB of switch buffer for
# the bottleneck port (a share of a shared-buffer switch), RED/ECN marking
# from 50 KiB (Kmin) to 500 KiB (Kmax) with Pmax 10 %, RC local ACK timeout
# 4.2 ms (code 10), 16 KiB RDMA WRITEs, 64 outstanding per flow.
CC_FABRIC=(--link-gbps 100 --link-delay-ns 1000 --buffer-kb 16384
  --red-kmin-kb 50 --red-kmax-kb 500 --red-pmax 0.1
  --qp-timeout 10 --msg-kb 16 --sq-depth 64 --window-us 1000)
# DCQCN with the parameters of Zhu et al. 2015 (RP) and their NP interval N = 50 us.
CC_DCQCN=(--cc dcqcn --dcqcn-preset paper --min-time-between-cnps 50)
# DCQCN with the ConnectX firmware defaults (rpg_byte_reset in 64-byte units).
CC_DCQCN_CX=(--cc dcqcn --dcqcn-preset connectx)
# TIMELY with the paper's alpha, beta and N, its thresholds scaled to this
# fabric (base RTT about 5 us instead of 20 us; 100 instead of 10 Gb/s).
CC_TIMELY=(--cc timely --timely-t-low-ns 10000 --timely-t-high-ns 100000
  --timely-min-rtt-ns 5000 --timely-min-rate-mbps 500 --timely-delta-mbps 100)
# Patched TIMELY (Zhu et al. CoNEXT 2016) on the same thresholds, each update
# weighed by elapsed/minRTT (the authors' reference code); beta 0.3 (0.8 and
# 0.1 compared in docs/CC.md).
CC_TIMELY_P=("${CC_TIMELY[@]}" --timely-patched 1 --timely-scale-by-elapsed 1 --timely-beta 0.3)
# The same fabric made lossless with PFC (IEEE 802.1Qbb; pause above 2 MiB,
# resume at 1 MiB) and 32 KiB NIC transmit queues (the PFC headroom): the
# setting DCQCN was designed for (Zhu et al. run it over PFC).
CC_PFC=(--pfc --pfc-xoff-kb 2048 --pfc-xon-kb 1024 --nic-queue-kb 32)
# Incast runs last 100 ms: with the paper's parameters two flows get one cut
# each per ~1 ms and their rates wander around the fair share for tens of ms
# (docs/CC.md "Fairness at N = 2"), so a 20 ms steady state is too short to
# average that out. The sim suite's test runs 40 ms (CC_TEST_US).
CC_INCAST_US=100000
CC_TEST_US=40000
CC_SCENARIO_US=40000

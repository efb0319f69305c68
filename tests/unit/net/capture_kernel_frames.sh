#!/bin/bash
# Capture kernel<->kernel ARP / ICMP / NDP frames between two namespaces (A pings B).
set -e
A=uroce-capA-$$; B=uroce-capB-$$
cleanup() { [ -n "$TP" ] && kill $TP 2>/dev/null; wait 2>/dev/null; ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null; }
trap cleanup EXIT
ip netns add $A; ip netns add $B
ip link add ka netns $A type veth peer name kb netns $B
for n in $A $B; do ip -n $n link set lo up; done
ip -n $A link set ka address 02:00:00:00:80:01
ip -n $B link set kb address 02:00:00:00:80:02
ip netns exec $A sysctl -qw net.ipv6.conf.ka.router_solicitations=0
ip netns exec $B sysctl -qw net.ipv6.conf.kb.router_solicitations=0
ip -n $A addr add 10.80.0.1/24 dev ka; ip -n $B addr add 10.80.0.2/24 dev kb
ip netns exec $A sysctl -qw net.ipv6.conf.ka.disable_ipv6=0; ip netns exec $B sysctl -qw net.ipv6.conf.kb.disable_ipv6=0
ip -n $A addr add fd00:80::1/64 dev ka nodad; ip -n $B addr add fd00:80::2/64 dev kb nodad
ip -n $A link set ka up; ip -n $B link set kb up
sleep 1
ip netns exec $B tshark -q -i kb -w /tmp/netcap/kernel.pcap 2>/tmp/netcap/tshark.err &
TP=$!
sleep 3
ip netns exec $A ping -c1 -s 56 -W 2 10.80.0.2
ip netns exec $A ping -6 -c1 -s 56 -W 2 fd00:80::2
ip -n $A link set ka up; ip -n $B link set kb up
sleep 1
kill $TP; wait $TP || true; TP=

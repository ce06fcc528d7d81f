#!/usr/bin/env bash
# Multi-worker training between two network hosts on one machine: network namespaces mirra-ns1 and
# mirra-ns2 joined by a veth pair (10.231.0.1 and .2), their names in /etc/hosts; mpirun runs in the
# first and starts one worker in each (its remote agent is `ip netns exec HOST`), OpenMPI over TCP on
# that link only. Checks the run against one device (final loss and the trained model's test loss,
# and the final loss with the optimizer state sharded over both hosts); then the parameter-server
# strategy with a server and a worker on each host (gRPC over the link) against one device too. Then
# limits the link to 1 Gbit/s each way (tc tbf; plus 2 ms delay with netem where the kernel has
# it) and checks that training completes under both strategies, printing multi-worker training's
# exposed communication per step (bench/exposed_communication.py over worker 0's trace) and the
# parameter servers' throughput. Removes the namespaces and the hosts lines
# however it ends. Skips (exit 77) only where namespaces cannot be made.
#   two_hosts_test.sh MIRRA MIRRA_EXAMPLES
set -euo pipefail
mirra=$1
examples=$2
work=$(mktemp -d)
agent="$work/netns-agent"
marker="# mirra two_hosts_test"

cleanup() {
  ip netns del mirra-ns1 2>/dev/null || true
  ip netns del mirra-ns2 2>/dev/null || true
  sed -i "/$marker/d" /etc/hosts 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup_quiet() { ip netns del mirra-ns1 2>/dev/null || true; ip netns del mirra-ns2 2>/dev/null || true; }
cleanup_quiet

if ! ip netns add mirra-ns1 2>/dev/null || ! ip netns add mirra-ns2 2>/dev/null; then
  echo "skipped: network namespaces cannot be created here (ip netns add needs root and CAP_SYS_ADMIN)"
  exit 77
fi
ip link add veth-m1 type veth peer name veth-m2
ip link set veth-m1 netns mirra-ns1
ip link set veth-m2 netns mirra-ns2
ip -n mirra-ns1 addr add 10.231.0.1/24 dev veth-m1
ip -n mirra-ns2 addr add 10.231.0.2/24 dev veth-m2
for n in 1 2; do
  ip -n mirra-ns$n link set lo up
  ip -n mirra-ns$n link set veth-m$n up
done
printf '10.231.0.1 mirra-ns1 %s\n10.231.0.2 mirra-ns2 %s\n' "$marker" "$marker" >> /etc/hosts

# OpenMPI starts its daemon on each host as `AGENT HOST COMMAND...`, the command a shell line.
cat > "$agent" <<'END'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" sh -c "$*"
END
chmod +x "$agent"

"$examples" write mlp "$work/mlp.mirra" > /dev/null
common=(train "$work/mlp.mirra" --steps 20 --batch-size 61 --threads 1 --json)
two_hosts() {
  ip netns exec mirra-ns1 mpirun --allow-run-as-root --host mirra-ns1:1,mirra-ns2:1 -np 2 \
    --mca plm_rsh_agent "$agent" --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24 \
    --mca oob_tcp_if_include 10.231.0.0/24 "$mirra" "$@"
}
field() { python3 -c "import json, sys; print(json.loads(sys.stdin.read().splitlines()[-1])['$1'])"; }
close() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * abs(b))" "$1" "$2"; }

want=$("$mirra" "${common[@]}" --strategy one_device --devices cpu:0 --save "$work/reference.mirra" | field final_loss)
got=$(two_hosts "${common[@]}" --strategy multi_worker_mirrored --devices cpu:0,cpu:1 --save "$work/two_hosts.mirra" | field final_loss)
echo "final loss: one device $want, two hosts $got"
close "$got" "$want" || { echo "FAIL: the final losses differ"; exit 1; }
want_test=$("$mirra" eval "$work/reference.mirra" --json | field test_loss)
got_test=$("$mirra" eval "$work/two_hosts.mirra" --json | field test_loss)
echo "test loss of the trained model: one device $want_test, two hosts $got_test"
close "$got_test" "$want_test" || { echo "FAIL: the trained models differ"; exit 1; }
# Sharded optimizer state: reduce-scatters and all-gathers between the hosts.
sharded=$(two_hosts "${common[@]}" --strategy multi_worker_mirrored --devices cpu:0,cpu:1 --shard-optimizer-state | field final_loss)
echo "final loss with the optimizer state sharded over both hosts: $sharded"
close "$sharded" "$want" || { echo "FAIL: sharded training between the hosts differs from one device"; exit 1; }

# Parameter servers: ps 0 and worker 0 on the first host, ps 1 and worker 1 on the second, each task
# a process of its own in its host's namespace; the first argument is the update mode (sync or
# async). Prints worker 0's JSON summary.
ps_cluster='"cluster": {"ps": ["mirra-ns1:7100", "mirra-ns2:7100"], "worker": ["mirra-ns1:7101", "mirra-ns2:7101"]}, "token": "two-hosts"'
parameter_server() {
  local mode=$1
  shift
  local args=("$@") pids=() spec role index host pid failed=0
  for spec in "ps 0 mirra-ns1" "ps 1 mirra-ns2" "worker 0 mirra-ns1" "worker 1 mirra-ns2"; do
    read -r role index host <<< "$spec"
    MIRRA_CLUSTER="{$ps_cluster, \"task\": {\"type\": \"$role\", \"index\": $index}}" \
      ip netns exec "$host" "$mirra" "${args[@]}" --strategy parameter_server --update-mode "$mode" > "$work/$role$index.out" 2> "$work/$role$index.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ $failed -ne 0 ]; then cat "$work"/ps?.err "$work"/worker?.err >&2; return 1; fi
  tail -n 1 "$work/worker0.out"
}
got_ps=$(parameter_server sync "${common[@]}" --save "$work/ps.mirra" | field final_loss)
echo "final loss with parameter servers on both hosts: $got_ps"
close "$got_ps" "$want" || { echo "FAIL: parameter-server training between the hosts differs from one device"; exit 1; }
got_ps_test=$("$mirra" eval "$work/ps.mirra" --json | field test_loss)
echo "test loss of the model the parameter servers trained: $got_ps_test"
close "$got_ps_test" "$want_test" || { echo "FAIL: the parameter servers' trained model differs"; exit 1; }

for n in 1 2; do ip netns exec mirra-ns$n tc qdisc add dev veth-m$n root handle 1: tbf rate 1gbit burst 256kb latency 50ms; done
delay="no netem in this kernel"
if ip netns exec mirra-ns1 tc qdisc add dev veth-m1 parent 1:1 handle 10: netem delay 2ms 2>/dev/null; then
  ip netns exec mirra-ns2 tc qdisc add dev veth-m2 parent 1:1 handle 10: netem delay 2ms
  delay="2 ms each way"
fi
limited=$(two_hosts train "$work/mlp.mirra" --steps 50 --batch-size 128 --threads 1 --json --trace "$work/limited.json" \
  --strategy multi_worker_mirrored --devices cpu:0 | field total_steps)
echo "over a 1 Gbit/s link ($delay): $limited steps"
[ "$limited" = 50 ] || { echo "FAIL: training over the limited link did not complete"; exit 1; }
echo "exposed communication per step there: $(python3 "$(dirname "$0")/../../bench/exposed_communication.py" "$work/limited.json.worker0")"
for mode in sync async; do
  ps_summary=$(parameter_server "$mode" train "$work/mlp.mirra" --steps 50 --batch-size 128 --threads 1 --json)
  ps_steps=$(field steps <<< "$ps_summary")
  echo "parameter servers ($mode) over the same link: $ps_steps steps, $(field examples_per_s <<< "$ps_summary") examples/s on worker 0"
  [ "$ps_steps" = 50 ] || { echo "FAIL: $mode parameter-server training over the limited link did not complete"; exit 1; }
done
echo "two hosts: pass"

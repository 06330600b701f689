#!/usr/bin/env bash
# The operator's reconcile work at 2 real nodes and at NODES simulated ones:
# the appliance on this machine's two test nodes (tests/k8s/appliance.sh),
# then Node objects without kubelets (labelled for gateways, tainted so the
# DaemonSet places no pod on them: the operator still renders each one's
# ConfigMap and DaqiriNodeState, which is the per-node fan-out that grows).
#
# At each size, a DaqiriFlow on the sample port (every node) is applied and
# then deleted; for each change: the passes it took, their total time (the
# operator's daqiri_operator_sync_duration_seconds), the time until the
# passes stop, and the API requests of the kinds the operator reads and
# writes (the API server's apiserver_request_total, every verb but WATCH, on
# configmaps, pods, nodes, events and the daqiri.nvidia.com resources;
# kubelets read some of them too, so the count is an upper bound). Also the
# time from the NODES-2 Node objects' creation until each has its ConfigMap.
#
# Usage (root): tests/bench/operator_scale.sh [NODES]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/../.."
NODES=${1:-100}
[[ $(id -u) -eq 0 ]] || { echo "needs root (the test nodes)" >&2; exit 1; }
PATH=$PWD/target/tools/bin:$PATH
NS=daqiri
export KUBECONFIG
KUBECONFIG=$(tests/k8s/appliance.sh up)
trap 'tests/k8s/appliance.sh down' EXIT

operator_metrics() {
    local ip
    ip=$(kubectl -n $NS get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[0].status.podIP}')
    curl -fs "http://$ip:8080/metrics"
}

# "passes seconds requests" now.
counters() {
    { operator_metrics; echo "# apiserver"; kubectl get --raw /metrics; } | python3 -c '
import re, sys
passes = seconds = requests = 0.0
kinds = {"configmaps", "pods", "nodes", "events", "daqiriports", "daqiriflows", "daqirinodestates"}
for line in sys.stdin:
    if line.startswith("daqiri_operator_sync_passes_total "):
        passes = float(line.split()[1])
    elif line.startswith("daqiri_operator_sync_duration_seconds_sum "):
        seconds = float(line.split()[1])
    elif line.startswith("apiserver_request_total{"):
        labels = dict(re.findall(r"(\w+)=\"([^\"]*)\"", line))
        if labels.get("resource") in kinds and labels.get("verb") != "WATCH":
            requests += float(line.rsplit(" ", 1)[1])
print(int(passes), seconds, int(requests))'
}

# Runs "$@" (a change), waits until no pass has run for 3 s; prints its figures.
measure() {
    local what=$1 before after started quiet=0 last
    shift
    read -r -a before < <(counters)
    started=$(date +%s.%N)
    "$@" >/dev/null
    last=${before[0]}
    while ((quiet < 6)); do
        sleep 0.5
        read -r -a after < <(counters)
        if [[ ${after[0]} == "$last" ]]; then ((quiet += 1)); else quiet=0 last=${after[0]}; fi
    done
    python3 -c "
import sys
b, a, started, ended = sys.argv[1:4], sys.argv[4:7], float(sys.argv[7]), float(sys.argv[8])
print(f'{sys.argv[9]:<34} {int(a[0]) - int(b[0]):>6} {float(a[1]) - float(b[1]):>10.3f} {ended - started - 3:>10.1f} {int(a[2]) - int(b[2]):>9}')
" "${before[@]}" "${after[@]}" "$started" "$(date +%s.%N)" "$what"
}

flow() {
    cat <<EOF
apiVersion: daqiri.nvidia.com/v1alpha1
kind: DaqiriFlow
metadata: {name: bench, namespace: $NS}
spec: {port: udp-rx, id: 20, match: {udpSrc: "20000-20009"}, queue: 0}
EOF
}

round() {
    local nodes=$1
    measure "flow applied, $nodes nodes" kubectl apply -f <(flow)
    measure "flow deleted, $nodes nodes" kubectl -n $NS delete daqiriflow bench
}

simulated_nodes() {
    local i
    for ((i = 3; i <= NODES; i++)); do
        cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: sim-$(printf %03d "$i")
  labels: {daqiri.nvidia.com/gateway: "true", daqiri.test/simulated: "true"}
spec:
  taints: [{key: daqiri.test/no-kubelet, value: "true", effect: NoSchedule}]
---
EOF
    done
}

echo "change                             passes  pass time s  settled s  API requests"
round 2
started=$(date +%s.%N)
simulated_nodes | kubectl apply -f - >/dev/null
until (($(kubectl -n $NS get configmaps -l app.kubernetes.io/managed-by=daqiri-operator --no-headers | wc -l) >= NODES)); do
    sleep 0.5
done
echo "$((NODES - 2)) Node objects created: every node's ConfigMap after $(python3 -c "import time; print(f'{time.time() - $started:.1f}')") s"
sleep 5
round "$NODES"

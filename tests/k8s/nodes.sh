#!/usr/bin/env bash
# Real Kubernetes nodes on this machine, for the appliance's end-to-end suite:
# a control plane (tests/k8s/control-plane.sh) on the address of a bridge of
# our own, kube-scheduler and kube-proxy, and per node a containerd (2.x, its
# runc shim; Debian's runc) and a kubelet, each with its own root directory,
# cgroup root, ports and pod subnet on that bridge (Debian's CNI plugins).
# Cluster DNS is CoreDNS (tests/k8s/cluster-dns) on the bridge's address.
# Each node has two veths its device plugin (tests/k8s/control-plane/
# veth-device-plugin) hands out as resource daqiri.test/veth_vf, the way the
# SR-IOV network device plugin hands out VFs; their peers are in network
# namespace daqiri-vfs, each with an address and its veth's MAC as neighbour.
# No registry: images are imported into each node's containerd, among them a
# pause image built here from Kubernetes' own pause.c and a busybox image
# from Debian's busybox-static (the chart's `helm test` pod).
#
#   nodes.sh build            builds containerd, its shim, ctr, crictl, CoreDNS
#                             and the device plugin once per pinned release
#                             (tests/k8s/runtime, tests/k8s/cluster-dns,
#                             tests/k8s/control-plane); prints the bin dir
#   nodes.sh up DIR N         the plane and N nodes (node-a, node-b, ...) in DIR;
#                             prints the admin kubeconfig once every node is Ready
#   nodes.sh import DIR ARCHIVE   an OCI archive into every node's containerd
#   nodes.sh down DIR         stops everything and removes what it made
#
# The host is cgroup v1 here: the kubelets run with failCgroupV1: false and the
# cgroupfs driver (docs/kubernetes.md). Needs root.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=$here/runtime
# kubectl from tests/setup.sh
PATH=$here/../../target/tools/bin:$PATH
log() { echo "nodes: $*" >&2; }
# The bridge pods sit on; the API server listens on its address.
bridge=daqiri-k8s
gateway=10.244.0.1
names=(node-a node-b node-c)
busybox=localhost/busybox:1.35
dns_ready_port=10181
vf_namespace=daqiri-vfs
vf_resource=daqiri.test/veth_vf

build() {
    local key cache started
    key=$(cat "$module/go.mod" "$module/go.sum" "$here/cluster-dns/"* "$here/control-plane/"go.* \
        "$here/control-plane/veth-device-plugin/"* <(go env GOVERSION) | sha256sum | cut -c1-16)
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/runtime/$key
    if [[ ! -x $cache/bin/coredns ]]; then
        log "building containerd, its runc shim, ctr, crictl, CoreDNS and the device plugin (once per release; minutes on a fresh machine)"
        started=$SECONDS
        rm -rf "$cache.partial" && mkdir -p "$cache.partial/bin"
        (cd "$module" && go build -trimpath -buildvcs=false -tags "no_btrfs no_devmapper no_zfs" \
            -o "$cache.partial/bin/" github.com/containerd/containerd/v2/cmd/containerd \
            github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
            github.com/containerd/containerd/v2/cmd/ctr sigs.k8s.io/cri-tools/cmd/crictl)
        (cd "$here/cluster-dns" && go build -trimpath -buildvcs=false -o "$cache.partial/bin/coredns" .)
        (cd "$here/control-plane" && go build -trimpath -buildvcs=false -o "$cache.partial/bin/" ./veth-device-plugin)
        rm -rf "$cache" && mv "$cache.partial" "$cache"
        log "built in $((SECONDS - started)) s"
    fi
    echo "$cache/bin"
}

# The pause image, from the pause.c of the Kubernetes release the plane runs.
pause_image() {
    local dir=$1 source ctr
    source=$(cd "$here/control-plane" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
    gcc -Os -static -DVERSION=daqiri-test -o "$dir/pause" "$source"
    ctr=$(buildah from scratch)
    buildah copy --quiet "$ctr" "$dir/pause" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
    commit_image "$ctr" localhost/pause:3.10 "$dir/pause.tar"
}

# Busybox for the chart's `helm test` pod: Debian's static build, its applets
# linked as the upstream image has them.
busybox_image() {
    local dir=$1 ctr
    if ldd /bin/busybox >/dev/null 2>&1; then
        log "/bin/busybox is not Debian's static build (tests/setup.sh installs busybox-static)"
        exit 1
    fi
    ctr=$(buildah from scratch)
    buildah copy --quiet "$ctr" /bin/busybox /bin/busybox >/dev/null
    buildah run --isolation chroot "$ctr" /bin/busybox --install -s /bin
    buildah config --cmd /bin/sh "$ctr"
    commit_image "$ctr" "$busybox" "$dir/busybox.tar"
}

commit_image() {
    local ctr=$1 name=$2 archive=$3
    buildah commit --quiet --rm "$ctr" "$name" >/dev/null
    rm -f "$archive"
    buildah push --quiet "$name" "oci-archive:$archive:$name" >/dev/null
}

# CoreDNS answering the cluster's names on the bridge's address (every pod's
# nameserver: the kubelets' clusterDNS), as a client of the plane with the
# read access CoreDNS's own manifests grant it.
cluster_dns() {
    local dir=$1 bin=$2 kubeconfig=$3 waited=0
    kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "daqiri-test:cluster-dns"}
rules:
- {apiGroups: [""], resources: [services, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "daqiri-test:cluster-dns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "daqiri-test:cluster-dns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "daqiri-test:cluster-dns"}]
EOF
    "$here/control-plane.sh" client "$dir/plane" "$dir/dns" daqiri-test:cluster-dns >/dev/null
    cat >"$dir/Corefile" <<EOF
cluster.local:53 {
    bind $gateway
    errors
    ready 127.0.0.1:$dns_ready_port
    cache 5
    kubernetes cluster.local {
        kubeconfig $dir/dns.kubeconfig daqiri-test
    }
}
EOF
    "$bin/coredns" -conf "$dir/Corefile" >"$dir/coredns.log" 2>&1 &
    echo $! >"$dir/coredns.pid"
    until curl -fs "http://127.0.0.1:$dns_ready_port/ready" >/dev/null; do
        ((waited++ < 100)) || { log "CoreDNS not ready in 20 s"; tail -20 "$dir/coredns.log" >&2; exit 1; }
        sleep 0.2
    done
}

start_node() {
    local dir=$1 i=$2 bin=$3 kbin=$4
    local name=${names[$i]} node=$dir/${names[$i]} image
    mkdir -p "$node/cni" "$node/containerd"
    cat >"$node/cni/10-daqiri.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "daqiri-k8s", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "dataDir": "$node/ipam",
            "ranges": [[{"subnet": "10.244.0.0/16", "rangeStart": "10.244.$((i + 1)).2",
                         "rangeEnd": "10.244.$((i + 1)).254", "gateway": "$gateway"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
    cat >"$node/containerd.toml" <<EOF
version = 3
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$node/containerd.sock"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "localhost/pause:3.10"
# This machine lets no process lower its OOM score (the kubelet asks -998 for
# sandboxes): containerd raises what it is asked to its own score instead.
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "$node/cni"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "$(command -v runc)"
  SystemdCgroup = false
EOF
    PATH=$bin:$PATH "$bin/containerd" --config "$node/containerd.toml" >"$node/containerd.log" 2>&1 &
    echo $! >"$node/containerd.pid"
    local waited=0
    until [[ -S $node/containerd.sock ]]; do
        ((waited++ < 100)) || { log "$name: containerd did not start"; tail -20 "$node/containerd.log" >&2; exit 1; }
        sleep 0.1
    done
    for image in "$dir/pause.tar" "$dir/busybox.tar"; do
        "$bin/ctr" --address "$node/containerd.sock" -n k8s.io images import --all-platforms "$image" >/dev/null
    done

    "$here/control-plane.sh" client "$dir/plane" "$node/kubelet" "system:node:$name" system:nodes >/dev/null
    cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host is cgroup v1: Kubernetes 1.35 and later refuse it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
# Each node its own hierarchy, so two kubelets on one host do not meet.
cgroupRoot: /daqiri-$name
containerRuntimeEndpoint: unix://$node/containerd.sock
address: $gateway
port: $((10250 + 10 * i))
healthzBindAddress: 127.0.0.1
healthzPort: $((10248 + 10 * i))
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/plane/ca.crt}
authorization: {mode: AlwaysAllow}
failSwapOn: false
# A test machine's disk and memory run full in ways a cluster's do not.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
clusterDNS: [$gateway]
clusterDomain: cluster.local
podLogsDir: $node/pod-logs
serializeImagePulls: false
# A ConfigMap change reaches a pod's volume within a sync (a minute by
# default); the node-config sidecar's tests should not wait that long.
syncFrequency: 10s
EOF
    local controller
    for controller in /sys/fs/cgroup/*/; do
        [[ -e $controller/cgroup.procs ]] && mkdir -p "$controller/daqiri-$name"
    done
    # The kubelet's device manager listens on /var/lib/kubelet/device-plugins
    # whatever its root directory, so two kubelets on one host would share it:
    # each runs in a mount namespace of its own where that path is its node's
    # directory. Its root directory is a shared mount, so the volumes it
    # mounts for pods reach containerd in the host's namespace.
    mkdir -p "$node/kubelet" "$node/device-plugins" /var/lib/kubelet/device-plugins
    mount --bind "$node/kubelet" "$node/kubelet"
    mount --make-shared "$node/kubelet"
    unshare --mount --propagation unchanged sh -c 'mount --bind "$0" /var/lib/kubelet/device-plugins && exec "$@"' \
        "$node/device-plugins" "$kbin/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
        --root-dir "$node/kubelet" --cert-dir "$node/pki" --hostname-override "$name" --node-ip "$gateway" \
        --node-labels "daqiri.nvidia.com/gateway=true" \
        >"$node/kubelet.log" 2>&1 &
    echo $! >"$node/kubelet.pid"
    veth_vfs "$dir" "$i" "$bin"
}

# Node i's "VFs": veths dqvf-<letter>0 and 1 on the host, peers <name>p in
# $vf_namespace with address 10.250.<j>.2/24 and the veth's MAC as neighbour
# 10.250.<j>.1 (j = 2i + n), and the device plugin that hands them out.
veth_vfs() {
    local dir=$1 i=$2 bin=$3 n j vf vfs=()
    local name=${names[$i]} node=$dir/${names[$i]}
    for n in 0 1; do
        j=$((2 * i + n))
        vf=dqvf-${name#node-}$n
        ip link add "$vf" type veth peer name "${vf}p" netns "$vf_namespace"
        ip link set "$vf" up
        ip -n "$vf_namespace" link set "${vf}p" up
        ip -n "$vf_namespace" addr add "10.250.$j.2/24" dev "${vf}p"
        ip -n "$vf_namespace" neigh add "10.250.$j.1" lladdr "$(cat "/sys/class/net/$vf/address")" dev "${vf}p"
        vfs+=("$vf")
    done
    "$bin/veth-device-plugin" -kubelet-dir "$node/device-plugins" -resource "$vf_resource" \
        -devices "$(IFS=,; echo "${vfs[*]}")" >"$node/device-plugin.log" 2>&1 &
    echo $! >"$node/device-plugin.pid"
}

up() {
    local dir=$1 count=$2 bin kbin kubeconfig started=$SECONDS i
    dir=$(mkdir -p "$1" && cd "$1" && pwd)
    down "$dir" 2>/dev/null || true
    # `down` clears the host's KUBE-* and CNI-* iptables chains: never on a
    # machine where another Kubernetes owns them.
    if iptables-save 2>/dev/null | grep -q '^:\(KUBE\|CNI\)-'; then
        log "this host's iptables has KUBE-/CNI- chains another Kubernetes made: the test nodes would disturb it; refusing"
        exit 1
    fi
    bin=$(build)
    kbin=$("$here/control-plane.sh" build)
    ip link add "$bridge" type bridge
    ip addr add "$gateway/16" dev "$bridge"
    ip link set "$bridge" up
    sysctl -qw net.ipv4.ip_forward=1
    ip netns add "$vf_namespace"
    kubeconfig=$(DAQIRI_CONTROL_PLANE_ADDRESS=$gateway "$here/control-plane.sh" start "$dir/plane")
    pause_image "$dir"
    busybox_image "$dir"
    cluster_dns "$dir" "$bin" "$kubeconfig"

    "$here/control-plane.sh" client "$dir/plane" "$dir/scheduler" system:kube-scheduler >/dev/null
    "$kbin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" --leader-elect=false --secure-port 0 \
        >"$dir/kube-scheduler.log" 2>&1 &
    echo $! >"$dir/kube-scheduler.pid"
    "$here/control-plane.sh" client "$dir/plane" "$dir/proxy" system:kube-proxy >/dev/null
    "$kbin/kube-proxy" --kubeconfig "$dir/proxy.kubeconfig" --hostname-override "${names[0]}" \
        --cluster-cidr 10.244.0.0/16 --proxy-mode iptables --metrics-bind-address 127.0.0.1:10249 \
        --healthz-bind-address 127.0.0.1:10256 --conntrack-max-per-core 0 >"$dir/kube-proxy.log" 2>&1 &
    echo $! >"$dir/kube-proxy.pid"

    for ((i = 0; i < count; i++)); do
        start_node "$dir" "$i" "$bin" "$kbin"
    done
    local waited=0 ready part
    until ready=$(kubectl --kubeconfig "$kubeconfig" get nodes --no-headers 2>/dev/null | grep -cw Ready) &&
        ((ready == count)); do
        for part in "$dir/kube-scheduler" "$dir/kube-proxy" "$dir/coredns" "${names[@]:0:count}"; do
            [[ $part == /* ]] || part=$dir/$part/kubelet
            kill -0 "$(cat "$part.pid")" 2>/dev/null && continue
            log "$part exited; the end of its log:"
            tail -20 "$part.log" >&2
            exit 1
        done
        ((waited++ < 240)) || { log "not every node Ready in 120 s"; tail -20 "$dir"/node-a/kubelet.log >&2; exit 1; }
        sleep 0.5
    done
    # Ready with the device plugin's resource registered.
    waited=0
    until [[ $(kubectl --kubeconfig "$kubeconfig" get nodes -o json | python3 -c 'import json, sys
print(sum(n["status"].get("allocatable", {}).get(sys.argv[1]) == "2" for n in json.load(sys.stdin)["items"]))' \
        "$vf_resource") == "$count" ]]; do
        ((waited++ < 60)) || { log "the device plugins registered no $vf_resource in 30 s"; tail -5 "$dir"/node-*/device-plugin.log >&2; exit 1; }
        sleep 0.5
    done
    log "$count node(s) Ready in $((SECONDS - started)) s (logs in $dir)"
    echo "$kubeconfig"
}

import() {
    local dir archive bin node
    dir=$(cd "$1" && pwd)
    archive=$(realpath "$2")
    bin=$(build)
    for node in "$dir"/node-*/; do
        "$bin/ctr" --address "$node/containerd.sock" -n k8s.io images import --all-platforms "$archive" >/dev/null
    done
}

stop_pid() {
    local pidfile=$1 pid waited=0
    [[ -e $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do
        ((waited++ < 50)) || kill -KILL "$pid" 2>/dev/null || true
        sleep 0.1
    done
    rm -f "$pidfile"
}

down() {
    local dir node bin
    dir=$(cd "$1" 2>/dev/null && pwd) || return 0
    for node in "$dir"/node-*/; do
        [[ -d $node ]] || continue
        stop_pid "$node/device-plugin.pid"
        stop_pid "$node/kubelet.pid"
        # The pods' containers and sandboxes (and their network namespaces) go with their shims.
        pkill -KILL -f "containerd-shim-runc-v2 .*-address $node" 2>/dev/null || true
        stop_pid "$node/containerd.pid"
        umount -R "$node/kubelet/pods" 2>/dev/null || true
        grep -o " ${node%/}/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
        rm -rf "$node" || log "cannot remove all of $node"
    done
    stop_pid "$dir/kube-scheduler.pid"
    stop_pid "$dir/kube-proxy.pid"
    stop_pid "$dir/coredns.pid"
    # What kube-proxy and the CNI plugins left in the host's iptables.
    "$("$here/control-plane.sh" build)/kube-proxy" --cleanup >/dev/null 2>&1 || true
    local table chain chains
    for table in nat filter mangle; do
        # The kubelet's own chains too (its canaries, KUBE-FIREWALL and the jumps to it).
        iptables-save -t $table | awk '/^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE|CNI)-/ {sub(/^-A/, "-D"); print}' |
            while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done
        # Emptied first, then deleted: they jump to one another.
        mapfile -t chains < <(iptables-save -t $table | awk -F'[: ]' '/^:(KUBE|CNI)-/ {print $2}')
        for chain in "${chains[@]}"; do iptables -t $table -F "$chain" 2>/dev/null || true; done
        for chain in "${chains[@]}"; do iptables -t $table -X "$chain" 2>/dev/null || true; done
    done
    "$here/control-plane.sh" stop "$dir/plane" 2>/dev/null || true
    ip link del "$bridge" 2>/dev/null || true
    # The veths go with their peers' namespace.
    ip netns del "$vf_namespace" 2>/dev/null || true
    for group in /sys/fs/cgroup/*/daqiri-node-*; do
        [[ -d $group ]] && find "$group" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    true
}

case ${1:-} in
build) build ;;
up) up "${2:?up needs a directory}" "${3:-1}" ;;
import) import "${2:?import needs a directory}" "${3:?import needs an OCI archive}" ;;
down) down "${2:?down needs a directory}" ;;
*)
    echo "usage: $0 build | up DIR N | import DIR ARCHIVE | down DIR" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the operator's cluster suite:
# etcd, kube-apiserver (RBAC, service-account token signing, a token file) and
# kube-controller-manager (garbage collection, namespaces, Jobs, DaemonSets,
# Deployments, service accounts), at the release tests/k8s/control-plane/go.mod
# pins, built from their Go modules. No kubelet, scheduler or container runtime:
# pods are objects whose status the tests write. (The same build carries the
# kubelet, kube-scheduler and kube-proxy that tests/k8s/nodes.sh runs real
# nodes with, on a plane it starts in node mode: DAQIRI_CONTROL_PLANE_ADDRESS.)
#
#   control-plane.sh build       builds once per pinned release; prints the bin dir
#   control-plane.sh start DIR   starts the three in DIR; prints the admin kubeconfig
#   control-plane.sh stop DIR    stops them and removes etcd's data
#   control-plane.sh stop-apiserver DIR, start-apiserver DIR: the API server
#                                alone (SIGKILL: a crash)
#
# The binaries are cached by the hash of the module's files under the user cache
# ($XDG_CACHE_HOME or ~/.cache, daqiri-gateway/control-plane/), beside Go's own
# module and build caches, so a clean clone on a machine that built them once pays
# seconds; a fresh machine pays the build (docs/kubernetes.md has the figures).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# Where the API server listens and what it advertises: loopback for the
# cluster suite; tests/k8s/nodes.sh gives the address its pods reach the host
# on (its bridge's), which also turns on what real nodes need: the Node
# authorizer, NodeRestriction, the `kubernetes` Service's endpoints, and the
# controllers of nodes, services and pods a kubelet-less suite must not have.
address=${DAQIRI_CONTROL_PLANE_ADDRESS:-127.0.0.1}
module=$here/control-plane
log() { echo "control-plane: $*" >&2; }
# Whose ServiceMonitor CRD the cluster gets (a Go module like the rest).
prometheus_operator=v0.85.0

build() {
    local key cache started
    command -v go >/dev/null || { log "needs the go command (Go 1.26 or later) to build the control plane"; exit 1; }
    # The release's version, which Kubernetes' own build stamps in (clients such
    # as helm check it against a chart's kubeVersion).
    local release ldflags
    release=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$module/go.mod")
    ldflags=""
    for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $package.gitVersion=$release -X $package.gitMajor=$(cut -d. -f1 <<<"${release#v}")"
        ldflags+=" -X $package.gitMinor=$(cut -d. -f2 <<<"$release") -X $package.gitTreeState=clean"
    done
    key=$(cat "$module/go.mod" "$module/go.sum" "$module/etcd/main.go" <(go env GOVERSION) <(echo "$ldflags") |
        sha256sum | cut -c1-16)
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/daqiri-gateway/control-plane/$key
    if [[ ! -x $cache/bin/kube-controller-manager ]]; then
        log "building kube-apiserver, kube-controller-manager, etcd, and the nodes' kube-scheduler, kube-proxy and kubelet (once per release; minutes on a fresh machine)"
        started=$SECONDS
        rm -rf "$cache.partial" && mkdir -p "$cache.partial/bin"
        (cd "$module" && go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$cache.partial/bin/" \
            k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./etcd \
            k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubelet)
        rm -rf "$cache" && mv "$cache.partial" "$cache"
        log "built in $((SECONDS - started)) s"
    fi
    echo "$cache/bin"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A CA, the API server's serving certificate for loopback, the service-account
# signing key, and a token file: the admin (system:masters) and the controller
# manager (its bootstrap RBAC role; each controller then acts as its own
# service account, as kubeadm sets it up).
pki() {
    local dir=$1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=daqiri-test-ca \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
        -keyout "$dir/apiserver.key" -out "$dir/apiserver.csr" 2>/dev/null
    openssl x509 -req -in "$dir/apiserver.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -days 30 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' "$address") \
        -out "$dir/apiserver.crt" 2>/dev/null
    # What the API server shows kubelets (logs, exec, port-forward) on real nodes.
    client_cert "$dir" "$dir/kubelet-client" kube-apiserver-kubelet-client system:masters
    openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
    openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
    admin_token=$(openssl rand -hex 24)
    manager_token=$(openssl rand -hex 24)
    {
        echo "$admin_token,daqiri-test-admin,daqiri-test-admin,\"system:masters\""
        echo "$manager_token,system:kube-controller-manager,system:kube-controller-manager"
    } >"$dir/tokens.csv"
    chmod 600 "$dir/tokens.csv" "$dir"/*.key
}

# A key and certificate ($2.key, $2.crt) of the plane's CA in $1 for user $3,
# in group $4 when given.
client_cert() {
    local dir=$1 out=$2 subject="/CN=$3"
    [[ -n ${4:-} ]] && subject="/O=$4/CN=$3"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subject" \
        -keyout "$out.key" -out "$out.csr" 2>/dev/null
    openssl x509 -req -in "$out.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -days 30 -out "$out.crt" 2>/dev/null
    rm -f "$out.csr"
    chmod 600 "$out.key"
}

# A kubeconfig for the server $1 with CA $2, its user's credentials $3 (YAML).
kubeconfig() {
    local server=$1 ca=$2 credentials=$3
    cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: daqiri-test
  cluster: {server: "$server", certificate-authority: "$ca"}
users:
- name: user
  user: $credentials
contexts:
- name: daqiri-test
  context: {cluster: daqiri-test, user: user}
current-context: daqiri-test
EOF
}

start() {
    local dir bin etcd_port peer_port api_port server started
    dir=$(mkdir -p "$1" && cd "$1" && pwd)
    stop "$dir" 2>/dev/null || true
    rm -f "$dir"/*.log
    bin=$(build)
    started=$SECONDS
    pki "$dir"
    etcd_port=$(free_port)
    peer_port=$(free_port)
    api_port=$(free_port)
    server=https://$address:$api_port
    kubeconfig "$server" "$dir/ca.crt" "{token: \"$admin_token\"}" >"$dir/admin.kubeconfig"
    kubeconfig "$server" "$dir/ca.crt" "{token: \"$manager_token\"}" >"$dir/controller-manager.kubeconfig"

    "$bin/etcd" --name test --data-dir "$dir/etcd" --log-level warn \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "test=http://127.0.0.1:$peer_port" --unsafe-no-fsync \
        >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    # Where tests that play an older writer reach the store (its JSON gateway).
    echo "http://127.0.0.1:$etcd_port" >"$dir/etcd.url"

    echo "etcd_port=$etcd_port api_port=$api_port address=$address" >"$dir/ports"
    start_apiserver "$dir" "$bin"

    local controllers=serviceaccount,serviceaccount-token,garbagecollector,namespace,job,daemonset,deployment,replicaset,clusterrole-aggregation
    [[ $address == 127.0.0.1 ]] || controllers+=,endpointslice,endpointslicemirroring,nodelifecycle,podgc,ttl-after-finished,statefulset,root-ca-certificate-publisher-controller
    "$bin/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
        --use-service-account-credentials --service-account-private-key-file "$dir/sa.key" \
        --root-ca-file "$dir/ca.crt" --leader-elect=false --secure-port 0 \
        --controllers "$controllers" \
        >"$dir/kube-controller-manager.log" 2>&1 &
    echo $! >"$dir/kube-controller-manager.pid"
    # Ready once it acts: the service-account controller gives each namespace
    # its `default` account.
    until_ready "$dir" "$server/api/v1/namespaces/default/serviceaccounts/default" kube-controller-manager 60
    # The Prometheus operator's ServiceMonitor CRD, as a cluster running it has:
    # the chart's metrics.serviceMonitor renders one.
    local monitors
    monitors=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$prometheus_operator" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
    curl -sf --cacert "$dir/ca.crt" -H "Authorization: Bearer $admin_token" -X PATCH \
        -H 'Content-Type: application/apply-patch+yaml' --data-binary \
        @"$monitors/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" \
        "$server/apis/apiextensions.k8s.io/v1/customresourcedefinitions/servicemonitors.monitoring.coreos.com?fieldManager=control-plane.sh" \
        >/dev/null
    log "etcd, kube-apiserver and kube-controller-manager up at $server in $((SECONDS - started)) s (logs in $dir)"
    echo "$dir/admin.kubeconfig"
}

# The API server of the plane in $1 (binaries in $2), on its recorded ports;
# waits until it is ready.
start_apiserver() {
    local dir=$1 bin=$2 etcd_port api_port
    eval "$(cat "$dir/ports")"  # also the address it was started on
    admin_token=$(awk -F, '$2 == "daqiri-test-admin" {print $1}' "$dir/tokens.csv")
    # Endpoints may not name a loopback address: on loopback the reconciler
    # that publishes the API server as the `kubernetes` Service is off.
    local node_mode=()
    if [[ $address == 127.0.0.1 ]]; then
        node_mode=(--endpoint-reconciler-type none --authorization-mode RBAC)
    else
        node_mode=(--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
            --kubelet-client-certificate "$dir/kubelet-client.crt" --kubelet-client-key "$dir/kubelet-client.key"
            --kubelet-preferred-address-types InternalIP)
    fi
    "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address "$address" --secure-port "$api_port" --advertise-address "$address" \
        "${node_mode[@]}" --tls-cert-file "$dir/apiserver.crt" \
        --tls-private-key-file "$dir/apiserver.key" --client-ca-file "$dir/ca.crt" \
        --token-auth-file "$dir/tokens.csv" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
        --service-cluster-ip-range 10.96.0.0/16 --allow-privileged --profiling=false \
        >>"$dir/kube-apiserver.log" 2>&1 &
    echo $! >"$dir/kube-apiserver.pid"
    until_ready "$dir" "https://$address:$api_port/readyz" kube-apiserver 120
}

alive() {
    local dir=$1 name=$2
    kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null && return
    log "$name exited; the end of $dir/$name.log:"
    tail -20 "$dir/$name.log" >&2
    exit 1
}

until_ready() {
    local dir=$1 url=$2 name=$3 limit=$4 waited=0
    until curl -sf --cacert "$dir/ca.crt" -H "Authorization: Bearer $admin_token" "$url" >/dev/null; do
        alive "$dir" etcd
        alive "$dir" "$name"
        ((waited++ < limit * 2)) || { log "$name not ready in $limit s"; exit 1; }
        sleep 0.5
    done
}

stop() {
    stop_only TERM "$1" kube-controller-manager kube-apiserver etcd
    rm -rf "$1/etcd"
}

# Stops the named parts of the plane in $2 with signal $1, then SIGKILL after
# 5 s (the API server drains requests for up to a minute; nothing here needs it).
stop_only() {
    local signal=$1 dir=$2 name pid waited
    shift 2
    for name in "$@"; do
        [[ -e $dir/$name.pid ]] || continue
        pid=$(cat "$dir/$name.pid")
        kill "-$signal" "$pid" 2>/dev/null || true
        waited=0
        while kill -0 "$pid" 2>/dev/null; do
            ((waited++ < 50)) || kill -KILL "$pid" 2>/dev/null || true
            sleep 0.1
        done
        rm -f "$dir/$name.pid"
    done
}

# A client of the running plane in DIR as USER (in GROUP): OUT.key, OUT.crt
# and OUT.kubeconfig, whose path it prints (the nodes' kubelets, scheduler,
# proxy and DNS, tests/k8s/nodes.sh).
client() {
    local dir=$1 out=$2 server
    server=$(grep -o 'https://[^"]*' "$dir/admin.kubeconfig")
    client_cert "$dir" "$out" "$3" "${4:-}"
    kubeconfig "$server" "$dir/ca.crt" "{client-certificate: \"$out.crt\", client-key: \"$out.key\"}" >"$out.kubeconfig"
    echo "$out.kubeconfig"
}

case ${1:-} in
build) build ;;
start) start "${2:?start needs a directory}" ;;
client) client "${2:?client needs the plane directory}" "${3:?client needs an output path}" "${4:?client needs a user}" "${5:-}" ;;
stop) stop "${2:?stop needs a directory}" ;;
# For tests of what clients see while the API server is away (watches that
# come back to a compacted store).
stop-apiserver) stop_only KILL "${2:?stop-apiserver needs a directory}" kube-apiserver ;;
start-apiserver) start_apiserver "${2:?start-apiserver needs a directory}" "$(build)" ;;
*)
    echo "usage: $0 build | start DIR | stop DIR | client DIR OUT USER [GROUP] | stop-apiserver DIR | start-apiserver DIR" >&2
    exit 2
    ;;
esac

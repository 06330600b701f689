#!/usr/bin/env bash
# The appliance on a local cluster, to try it: the image built here, two real
# nodes of this machine (tests/k8s/nodes.sh), `helm install` of the chart and
# the sample UDP port. Needs root (the suite's own setup: tests/setup.sh).
#
#   tests/k8s/appliance.sh up      prints the admin kubeconfig when all is Ready
#   tests/k8s/appliance.sh down    removes it all
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=target/k8s/appliance
PATH=$PWD/target/tools/bin:$PATH

case ${1:-} in
up)
    tests/setup.sh >/dev/null
    image=$(tests/k8s/image.sh build socket)
    kubeconfig=$(tests/k8s/nodes.sh up "$dir" 2)
    tests/k8s/image.sh archive socket "$dir/gateway-image.tar"
    tests/k8s/nodes.sh import "$dir" "$dir/gateway-image.tar"
    helm --kubeconfig "$kubeconfig" install daqiri-gateway charts/daqiri-gateway -n daqiri --create-namespace \
        -f tests/k8s/e2e/values.yaml >&2
    kubectl --kubeconfig "$kubeconfig" -n daqiri rollout status deploy/daqiri-gateway-operator --timeout 180s >&2
    kubectl --kubeconfig "$kubeconfig" -n daqiri apply -f operator/samples/port-socket.yaml >&2
    kubectl --kubeconfig "$kubeconfig" -n daqiri rollout status ds/daqiri-gateway-gateway --timeout 240s >&2
    echo "appliance: $image on two nodes; try: kubectl --kubeconfig $kubeconfig -n daqiri get pods,daqiriports -o wide" >&2
    echo "$kubeconfig"
    ;;
down) tests/k8s/nodes.sh down "$dir" ;;
*)
    echo "usage: $0 up | down" >&2
    exit 2
    ;;
esac

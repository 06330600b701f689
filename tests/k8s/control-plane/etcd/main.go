// etcd, the release k8s.io/kubernetes pins, built beside the API server so
// the two always match.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

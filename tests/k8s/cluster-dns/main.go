// The test nodes' cluster DNS: CoreDNS at a pinned release with only the
// plugins a cluster's service names need, built from its Go module by
// tests/k8s/nodes.sh. CoreDNS's own main compiles in every plugin it ships
// (cloud providers' SDKs among them); this is the build CoreDNS documents
// for choosing plugins: its server with a directive list of our own.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order plugins see a query in, as CoreDNS's own plugin.cfg has them.
	dnsserver.Directives = []string{"bind", "ready", "errors", "cache", "kubernetes"}
}

func main() { coremain.Run() }

// A device plugin for the test nodes (tests/k8s/nodes.sh): it registers a
// resource with a kubelet through the kubelet's deviceplugin/v1beta1 API and
// hands out veths as the SR-IOV network device plugin hands out VFs. This
// machine has no SR-IOV NIC; what the gateway sees is what it would see there:
// the scheduler counts the resource, the kubelet allocates devices, checkpoints
// them and puts PCIDEVICE_<RESOURCE>=<ids> into the container. The ids are
// netdev names here, PCIe addresses there.
//
//	veth-device-plugin -kubelet-dir DIR -resource daqiri.test/veth_vf -devices dqvf-a0,dqvf-a1
//
// A device is healthy while its netdev exists and is up; a change reaches the
// kubelet through ListAndWatch. When the kubelet restarts it removes every
// socket in DIR: the plugin then serves and registers again.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	names    []string

	mu       sync.Mutex
	devices  []*pluginapi.Device
	watchers map[chan []*pluginapi.Device]struct{}
}

// envVar is the variable the SR-IOV network device plugin sets for a resource:
// PCIDEVICE_ and the name upper-cased, '.' and '/' as '_'.
func envVar(resource string) string {
	return "PCIDEVICE_" + strings.ToUpper(strings.NewReplacer(".", "_", "/", "_").Replace(resource))
}

func health(netdev string) string {
	state, err := os.ReadFile(filepath.Join("/sys/class/net", netdev, "operstate"))
	if err == nil && strings.TrimSpace(string(state)) == "up" {
		return pluginapi.Healthy
	}
	return pluginapi.Unhealthy
}

// probe reads every device's health and tells the watchers when it changed.
func (p *plugin) probe() {
	devices := make([]*pluginapi.Device, 0, len(p.names))
	for _, name := range p.names {
		devices = append(devices, &pluginapi.Device{ID: name, Health: health(name)})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sameHealth(devices, p.devices) {
		return
	}
	for _, d := range devices {
		log.Printf("%s %s: %s", p.resource, d.ID, d.Health)
	}
	p.devices = devices
	for w := range p.watchers {
		select {
		case w <- devices:
		default: // the watcher has an update pending; it reads the newest list
		}
	}
}

// sameHealth compares ids and health (the messages' internal state differs
// between any two).
func sameHealth(a, b []*pluginapi.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Health != b[i].Health {
			return false
		}
	}
	return true
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	updates := make(chan []*pluginapi.Device, 1)
	p.mu.Lock()
	p.watchers[updates] = struct{}{}
	current := p.devices
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, updates)
		p.mu.Unlock()
	}()
	for {
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: current}); err != nil {
			return err
		}
		select {
		case current = <-updates:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (p *plugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		for _, id := range container.DevicesIds {
			if !slices.Contains(p.names, id) {
				return nil, fmt.Errorf("%s has no device %q (it has %s)", p.resource, id, strings.Join(p.names, ", "))
			}
		}
		log.Printf("allocating %s to a container", strings.Join(container.DevicesIds, ","))
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{envVar(p.resource): strings.Join(container.DevicesIds, ",")},
		})
	}
	return response, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve listens on DIR/endpoint and registers the resource with the kubelet
// listening on DIR/kubelet.sock.
func (p *plugin) serve(dir, endpoint string) (*grpc.Server, error) {
	socket := filepath.Join(dir, endpoint)
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	go func() { _ = server.Serve(listener) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		server.Stop()
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: p.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		server.Stop()
		return nil, fmt.Errorf("registering with the kubelet: %w", err)
	}
	log.Printf("%s registered with the kubelet at %s (%s)", p.resource, dir, strings.Join(p.names, ", "))
	return server, nil
}

func main() {
	dir := flag.String("kubelet-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	resource := flag.String("resource", "daqiri.test/veth_vf", "the resource name to register")
	devices := flag.String("devices", "", "netdevs to hand out, comma-separated")
	flag.Parse()
	if *devices == "" {
		log.Fatal("-devices names no netdev")
	}
	p := &plugin{resource: *resource, names: strings.Split(*devices, ","), watchers: map[chan []*pluginapi.Device]struct{}{}}
	endpoint := "daqiri-" + strings.NewReplacer(".", "-", "/", "-").Replace(*resource) + ".sock"

	var server *grpc.Server
	for {
		p.probe()
		if _, err := os.Stat(filepath.Join(*dir, endpoint)); server == nil || err != nil {
			if server != nil {
				log.Printf("%s is gone (the kubelet restarted): serving and registering again", endpoint)
				server.Stop()
			}
			var err error
			if server, err = p.serve(*dir, endpoint); err != nil {
				log.Printf("%v; trying again", err)
				server = nil
			}
		}
		time.Sleep(time.Second)
	}
}

package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fileGateway is a gateway started from a configuration file, which a test rewrites and
// reloads. Its operator's endpoints are on a loopback admin listener (fileAdminListen).
type fileGateway struct {
	*env
	path string
}

// fileAdminListen starts every file a fileGateway is given.
const fileAdminListen = "admin_listen: 127.0.0.1:0\n"

func newFileGateway(t *testing.T, yaml string, opt gateway.Options) *fileGateway {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(fileAdminListen+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opt.ConfigPath = path
	gw, err := gateway.New(context.Background(), cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	srv := h1servertest.NewServer(gw.Handler())
	admin := h1servertest.NewServer(gw.AdminHandler())
	t.Cleanup(func() { srv.Close(); admin.Close(); gw.Close() })
	e := &env{t: t, gw: gw, srv: srv, admin: admin}
	e.client = openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return &fileGateway{env: e, path: path}
}

// reload rewrites the file and asks for a reload; it returns the status and body.
func (g *fileGateway) reload(yaml string) (int, string) {
	g.t.Helper()
	if err := os.WriteFile(g.path, []byte(fileAdminListen+yaml), 0o600); err != nil {
		g.t.Fatal(err)
	}
	resp, body := postAPI(g.t.(*testing.T), g.admin.URL+"/admin/reload", "")
	return resp.StatusCode, string(body)
}

func (g *fileGateway) refresh() {
	resp, _ := postAPI(g.t.(*testing.T), g.admin.URL+"/admin/refresh", "")
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		g.t.Fatalf("refresh %d", resp.StatusCode)
	}
}

func gatewayYAML(replicas ...*sim.Server) string {
	var b strings.Builder
	b.WriteString("store: \"memory:\"\nmodels:\n  - name: sim-model\n    replicas:\n")
	for _, s := range replicas {
		fmt.Fprintf(&b, "      - {url: %q, name: %s}\n", s.URL(), s.Name())
	}
	return b.String()
}

// A reload swaps replicas while a stream is in flight: the stream completes on the replica
// it started on, which drains and then leaves; the new replica takes new work once probed.
// An invalid file, or one that changes what needs a restart, is refused and the running
// configuration kept.
func TestReloadWithoutDroppingStreams(t *testing.T) {
	old := startSim(t, sim.Config{Name: "old", DecodePerToken: 30 * time.Millisecond})
	replacement := startSim(t, sim.Config{Name: "new"})
	g := newFileGateway(t, gatewayYAML(old), gateway.Options{})

	done := make(chan streamResult, 1)
	go func() { done <- g.stream(testCtx(t), chatParams("a long answer", 30)) }()
	if _, err := old.WaitRecord(testCtx(t), func(r sim.Record) bool { return r.TokensSent > 0 }); err != nil {
		t.Fatal(err)
	}
	if status, body := g.reload(gatewayYAML(replacement)); status != http.StatusOK {
		t.Fatalf("reload %d %s", status, body)
	}
	if state, reason := g.replicaState("old"); state != "draining" {
		t.Fatalf("the replica that left is %s (%s)", state, reason)
	}
	g.refresh() // the new replica's first probe
	r := g.stream(testCtx(t), chatParams("after the reload", 3))
	if r.err != nil || len(replacement.Records()) != 1 {
		t.Fatalf("new request: %v, new replica records %d", r.err, len(replacement.Records()))
	}
	inFlight := <-done
	if inFlight.err != nil || inFlight.finish == "" || inFlight.content == "" {
		t.Fatalf("the stream in flight during the reload: %+v", inFlight)
	}
	for _, p := range g.readyz()["models"].([]any) {
		for _, rep := range p.(map[string]any)["replicas"].([]any) {
			if rep.(map[string]any)["name"] == "old" {
				t.Fatal("the drained replica is still listed after its last request")
			}
		}
	}

	// Refused: a file that does not validate, and one that moves the listener.
	if status, body := g.reload("models: [{name: m, replicas: [{url: 'nope'}]}]\n"); status != http.StatusBadRequest || !strings.Contains(body, "models[0].replicas[0].url") {
		t.Fatalf("invalid reload: %d %s", status, body)
	}
	if status, body := g.reload("listen: 127.0.0.1:9\n" + gatewayYAML(replacement)); status != http.StatusBadRequest || !strings.Contains(body, "listen") {
		t.Fatalf("restart-only reload: %d %s", status, body)
	}
	if r := g.stream(testCtx(t), chatParams("still serving", 3)); r.err != nil {
		t.Fatalf("after refused reloads: %v", r.err)
	}
}

// fakeResolver answers a name with the addresses a test sets, and counts lookups.
type fakeResolver struct {
	mu      sync.Mutex
	addrs   []string
	lookups chan struct{}
}

func (f *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	f.mu.Lock()
	a := append([]string(nil), f.addrs...)
	f.mu.Unlock()
	select {
	case f.lookups <- struct{}{}:
	default:
	}
	return a, nil
}

// LookupAddr knows no reverse names: replicas keep the default {ip}:{port} names.
func (f *fakeResolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	return nil, errors.New("no PTR records here")
}

func (f *fakeResolver) set(addrs ...string) {
	f.mu.Lock()
	f.addrs = addrs
	f.mu.Unlock()
}

// settled waits until the discovery loop has applied the current answer: the lookup after
// the next one starts only once the next one was applied.
func (f *fakeResolver) settled(t *testing.T) {
	for i := 0; i < 2; i++ {
		select {
		case <-f.lookups:
		case <-testCtx(t).Done():
			t.Fatal("no DNS lookup")
		}
	}
}

// A pool that names a DNS name: its addresses are its replicas. An address that appears
// joins after a passing probe; one that vanishes drains, its running request finishing, and
// then leaves.
func TestReplicasFromDNS(t *testing.T) {
	first := startSim(t, sim.Config{Name: "first", Addr: "127.0.0.2:0", DecodePerToken: 30 * time.Millisecond})
	port := strings.TrimPrefix(first.URL(), "http://127.0.0.2:")
	second := startSim(t, sim.Config{Name: "second", Addr: "127.0.0.3:" + port})
	res := &fakeResolver{lookups: make(chan struct{}, 1), addrs: []string{"127.0.0.2"}}
	yaml := fmt.Sprintf("store: \"memory:\"\nmodels:\n  - name: sim-model\n    replicas_from: {dns: engines.test, port: %s, every: 100ms}\n", port)
	g := newFileGateway(t, yaml, gateway.Options{Resolver: res})
	res.settled(t)
	g.refresh()
	if state, _ := g.replicaState("127.0.0.2:" + port); state != "healthy" {
		t.Fatalf("discovered replica %s", state)
	}
	done := make(chan streamResult, 1)
	go func() { done <- g.stream(testCtx(t), chatParams("long", 20)) }()
	if _, err := first.WaitRecord(testCtx(t), func(r sim.Record) bool { return r.TokensSent > 0 }); err != nil {
		t.Fatal(err)
	}
	res.set("127.0.0.3")
	res.settled(t)
	if state, _ := g.replicaState("127.0.0.2:" + port); state != "draining" {
		t.Fatalf("vanished replica %s", state)
	}
	if state, _ := g.replicaState("127.0.0.3:" + port); state != "unhealthy" {
		t.Fatalf("a new replica serves before its first probe: %s", state)
	}
	g.refresh()
	if r := g.stream(testCtx(t), chatParams("to the new one", 3)); r.err != nil || len(second.Records()) != 1 {
		t.Fatalf("%v, second got %d", r.err, len(second.Records()))
	}
	if r := <-done; r.err != nil || r.finish == "" {
		t.Fatalf("the stream on the vanished replica: %+v", r)
	}
}

package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
)

// childConfigEnv, when set, turns this test binary into a gateway process serving the
// configuration file it names: tests start it, kill -9 it, and check what survives.
const childConfigEnv = "FENCEGATE_TEST_GATEWAY_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(childConfigEnv); path != "" {
		if err := runChildGateway(path); err != nil {
			fmt.Fprintln(os.Stderr, "child gateway:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChildGateway(path string) error {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return err
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		return err
	}
	gw.Start()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	return http.Serve(ln, gw.Handler())
}

// child is a gateway running in its own process.
type child struct {
	cmd *exec.Cmd
	url string
}

// startChild runs a gateway process with the given YAML configuration.
func startChild(t *testing.T, yaml string) *child {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childConfigEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(c.kill)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			c.url = u
			break
		}
	}
	if c.url == "" {
		t.Fatalf("child gateway did not start")
	}
	return c
}

// kill ends the process with SIGKILL: no shutdown, no final journal writes.
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// childYAML is a configuration for a child gateway in front of the given replicas.
func childYAML(store, id string, replicaURLs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nstore: %q\ngateway_id: %s\nidempotency:\n  owner_lease: 1s\nmodels:\n  - name: sim-model\n    replicas:\n", store, id)
	for i, u := range replicaURLs {
		fmt.Fprintf(&b, "      - {url: %q, name: sim-%d}\n", u, i+1)
	}
	return b.String()
}

package deploy

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// needTools finds the programs a test runs. Without them the test is skipped on a
// developer's machine and fails under CI, which installs them (.ci/run).
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; CI installs it (.ci/run)", n)
			}
			t.Skipf("%s is not installed (Debian's buildah, podman and runc)", n)
		}
	}
}

// offlineContainerfile is the Dockerfile's final stage as it can be built without a
// registry: on scratch with the host's CA bundle instead of the distroless base (which
// holds the same bundle, time zone data and a passwd file the gateway does not read), and
// the binary from the build context instead of the build stage. Every other instruction
// of the stage — USER, EXPOSE, ENTRYPOINT, CMD — is the Dockerfile's own line.
func offlineContainerfile(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for i, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			last = i
		}
	}
	lines := []string{"FROM scratch", "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"}
	for _, n := range res.AST.Children[last+1:] {
		if strings.EqualFold(n.Value, "copy") && len(n.Flags) > 0 && strings.HasPrefix(n.Flags[0], "--from=") {
			var args []string
			for a := n.Next; a != nil; a = a.Next {
				args = append(args, a.Value)
			}
			if len(args) != 2 || args[1] != "/fencegate" {
				t.Fatalf("the final stage copies %v from a build stage; the test knows only the binary", args)
			}
			lines = append(lines, "COPY fencegate /fencegate")
			continue
		}
		lines = append(lines, n.Original)
	}
	return strings.Join(lines, "\n") + "\n"
}

// The image, built with buildah from the Dockerfile's final stage and run with podman, starts
// the gateway as the image's non-root user and answers GET /healthz. The binary is linked
// statically by the C toolchain from the packages `go vet` compiled already, so the test
// costs seconds (a CGO_ENABLED=0 build, as the Dockerfile's, compiles everything again).
func TestImageServesHealthz(t *testing.T) {
	needTools(t, "go", "buildah", "podman", "runc")
	caBundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Skipf("no CA bundle to put in the image: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	buildCtx := filepath.Join(dir, "context")
	if err := os.Mkdir(buildCtx, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", `-s -w -linkmode external -extldflags "-static"`,
		"-o", filepath.Join(buildCtx, "fencegate"), "./cmd/fencegate")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(buildCtx, "ca-certificates.crt"), caBundle, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildCtx, "Containerfile"), []byte(offlineContainerfile(t)), 0o644); err != nil {
		t.Fatal(err)
	}

	// A storage of the test's own, so nothing is left in the host's; vfs and chroot work
	// where overlay mounts and namespaces do not.
	suffix := make([]byte, 4)
	rand.Read(suffix)
	image := "localhost/fencegate-test:" + hex.EncodeToString(suffix)
	storage := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "runroot"), "--storage-driver", "vfs"}
	run("buildah", append(storage, "bud", "--isolation", "chroot", "-f", filepath.Join(buildCtx, "Containerfile"), "-t", image, buildCtx)...)
	if user := strings.TrimSpace(run("buildah", append(storage, "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}}", image)...)); user != "65532:65532" {
		t.Errorf("the image runs as %q, want the Dockerfile's 65532:65532", user)
	}

	// A configuration the image's default command reads, with a replica nobody serves:
	// /healthz depends on nothing but the process.
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(etc, 0o755) // the container's user reads it through the bind mount
	cfg := "listen: 127.0.0.1:0\nstore: \"memory:\"\nmodels:\n  - name: m\n    replicas: [{url: \"http://127.0.0.1:9\"}]\n"
	if err := os.WriteFile(filepath.Join(etc, "fencegate.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// runc, not crun: crun refuses hybrid cgroup hierarchies. The limits are set below the
	// host's: raising one needs a privilege a sandboxed runner may not have. The host's
	// network, so the gateway listens on the host's loopback and nothing else is reached.
	podman := append(storage, "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file")
	name := "fencegate-test-" + hex.EncodeToString(suffix)
	args := append(podman, "run", "--rm", "--name", name, "--network", "host", "--ipc", "host",
		"--ulimit", "nofile=1024:4096", "--ulimit", "nproc=4096:4096",
		"-v", etc+":/etc/fencegate:ro", image)
	srv := exec.CommandContext(ctx, "podman", args...)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("podman", append(podman, "rm", "-f", "-t", "0", name)...).Run()
	})
	sc := bufio.NewScanner(stdout)
	var url string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "fencegate gateway listening on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		srv.Wait()
		t.Fatalf("the container never said where it listens:\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s", resp.Status)
	}
	// SIGTERM drains and exits 0.
	run("podman", append(podman, "stop", "-t", "30", name)...)
	if err := srv.Wait(); err != nil {
		t.Errorf("the gateway did not stop cleanly: %v\n%s", err, stderr.String())
	}
}

package deploy

import (
	"go/version"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// dockerfile is the parsed image definition.
type dockerfile struct {
	stages []instructions.Stage
	args   map[string]string // the global ARGs' defaults
}

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	stages, meta, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	d := dockerfile{stages: stages, args: map[string]string{}}
	for _, a := range meta {
		for _, kv := range a.Args {
			d.args[kv.Key] = kv.ValueString()
		}
	}
	return d
}

// final is the stage that becomes the image.
func (d dockerfile) final() instructions.Stage { return d.stages[len(d.stages)-1] }

// commands returns the stage's commands of type T.
func commands[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if c, ok := c.(T); ok {
			out = append(out, c)
		}
	}
	return out
}

// imageUID is the numeric user the image runs as.
func (d dockerfile) imageUID(t *testing.T) int64 {
	t.Helper()
	users := commands[*instructions.UserCommand](d.final())
	if len(users) == 0 {
		t.Fatal("the final stage sets no USER: the image would run as root")
	}
	user, _, _ := strings.Cut(users[len(users)-1].User, ":")
	uid, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		t.Fatalf("USER %q is not numeric: Kubernetes' runAsNonRoot cannot verify a user name", user)
	}
	return uid
}

func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("%d stages: the build and the image must be separate", len(d.stages))
	}
	final := d.final()

	// The image: distroless static (CA certificates, no shell) or scratch with the
	// certificates copied in.
	base := final.BaseName
	distroless := strings.HasPrefix(base, "gcr.io/distroless/static")
	if !distroless && base != "scratch" {
		t.Errorf("final base %q: want gcr.io/distroless/static... or scratch", base)
	}
	for _, c := range final.Commands {
		switch c.(type) {
		case *instructions.RunCommand, *instructions.ShellCommand:
			t.Errorf("final stage: %s needs a shell the image must not have", c.Name())
		case *instructions.HealthCheckCommand:
			t.Errorf("final stage: HEALTHCHECK has nothing to run in this image; orchestrators probe /healthz and /readyz")
		}
	}
	if uid := d.imageUID(t); uid == 0 {
		t.Error("USER is root")
	}

	// The binary comes from a build stage; find it by the COPY --from that brings it in.
	var copyBin *instructions.CopyCommand
	for _, c := range commands[*instructions.CopyCommand](final) {
		if c.DestPath == "/fencegate" {
			copyBin = c
		}
		if base == "scratch" && strings.Contains(strings.Join(c.SourcePaths, " "), "ca-certificates") {
			distroless = true // certificates present
		}
	}
	if !distroless {
		t.Error("a scratch image needs the CA certificates copied in")
	}
	if copyBin == nil || copyBin.From == "" || len(copyBin.SourcePaths) != 1 {
		t.Fatal("no COPY --from=<build stage> ... /fencegate in the final stage")
	}
	var build *instructions.Stage
	for i := range d.stages[:len(d.stages)-1] {
		if d.stages[i].Name == copyBin.From {
			build = &d.stages[i]
		}
	}
	if build == nil {
		t.Fatalf("COPY --from=%s names no stage", copyBin.From)
	}

	// The build: a Go toolchain no older than go.mod asks for, a static trimmed binary.
	if !strings.HasPrefix(build.BaseName, "golang:") {
		t.Errorf("build stage base %q is not golang:", build.BaseName)
	}
	goVersion := os.Expand(strings.TrimPrefix(build.BaseName, "golang:"), func(k string) string { return d.args[k] })
	goVersion, _, _ = strings.Cut(goVersion, "-")
	if want := goModVersion(t); version.Compare("go"+goVersion, want) < 0 {
		t.Errorf("build stage Go %s is older than go.mod's %s", goVersion, want)
	}
	var goBuild string
	for _, r := range commands[*instructions.RunCommand](*build) {
		if line := strings.Join(r.CmdLine, " "); strings.Contains(line, "go build") {
			goBuild = line
		}
	}
	fields := strings.Fields(strings.NewReplacer(`"`, " ", "=", " ").Replace(goBuild))
	for _, want := range []string{"CGO_ENABLED", "-trimpath", "-ldflags", "-s", "-w", "./cmd/fencegate", copyBin.SourcePaths[0]} {
		if !slices.Contains(fields, want) {
			t.Errorf("the go build command lacks %s: %q", want, goBuild)
		}
	}
	if !strings.Contains(goBuild, "CGO_ENABLED=0") {
		t.Errorf("the go build command does not set CGO_ENABLED=0: %q", goBuild)
	}

	// How it runs.
	eps := commands[*instructions.EntrypointCommand](final)
	if len(eps) != 1 || eps[0].PrependShell || !slices.Equal(eps[0].CmdLine, []string{"/fencegate"}) {
		t.Errorf("ENTRYPOINT must be exactly [\"/fencegate\"] in exec form: %+v", eps)
	}
	cmds := commands[*instructions.CmdCommand](final)
	if len(cmds) != 1 || cmds[0].PrependShell || !slices.Equal(cmds[0].CmdLine, []string{"serve", "--config", "/etc/fencegate/fencegate.yaml"}) {
		t.Errorf("CMD must be [\"serve\",\"--config\",\"/etc/fencegate/fencegate.yaml\"] in exec form: %+v", cmds)
	}
	var ports []string
	for _, e := range commands[*instructions.ExposeCommand](final) {
		ports = append(ports, e.Ports...)
	}
	if !slices.Contains(ports, "8080") && !slices.Contains(ports, "8080/tcp") {
		t.Errorf("EXPOSE %v lacks 8080", ports)
	}
}

// .dockerignore keeps what the build needs: the module, the sources, and .git for the
// revision stamp.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		p := strings.Trim(strings.TrimSpace(line), "/")
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		for _, keep := range []string{".git", "go.mod", "go.sum", "cmd", "internal", "*", "**"} {
			if p == keep {
				t.Errorf(".dockerignore leaves out %s", line)
			}
		}
	}
}

// goModVersion is the go line of go.mod, as "go1.N.M".
func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return "go" + strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go line")
	return ""
}

// Short names for the instruction types the Kubernetes tests compare with.
type (
	instructionsCmd    = instructions.CmdCommand
	instructionsExpose = instructions.ExposeCommand
)

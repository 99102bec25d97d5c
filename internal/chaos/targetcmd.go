package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// targetProcess prepares a foreign target for a sweep: it prints the replicas' URLs, and
// optionally fills a configuration template with them and runs a command that (re)starts
// the target.
//
// The template is a Go text/template of TargetEnv (.Target, .Host, .Port, .Model, .Fenced,
// .ToolServer, .Replicas with .Name .URL .Addr .Host .Port .Engine .Agent) plus .Dir, the
// directory the filled file is written to (absolute), for the paths a configuration names
// (a pid file, logs). The command runs under sh -c with $FENCEGATE_CHAOS_CONFIG set to the written
// file, in a process group of its own; if it is still running when the sweep ends, the
// group gets SIGTERM, and SIGKILL 5 s later. A command that exits by itself (a reload of
// a target that runs anyway) must exit 0.
type targetProcess struct {
	template, out, cmd string
	stdout             io.Writer
	readyTimeout       time.Duration

	proc   *exec.Cmd
	exited chan struct{} // closed when proc has exited
	err    error         // its exit status, once exited
}

// templateData is what a configuration template is filled with.
type templateData struct {
	TargetEnv
	Dir string
}

func (tp *targetProcess) prepare(ctx context.Context, env TargetEnv) error {
	fmt.Fprintln(tp.stdout, "replicas (each a fault proxy in front of a simulated engine, model \""+env.Model+"\"):")
	for _, r := range env.Replicas {
		kind := "engine"
		if r.Agent {
			kind = "fencegate agent in front of engine"
		}
		fmt.Fprintf(tp.stdout, "  %s %s (%s %s)\n", r.Name, r.URL, kind, r.Engine)
	}
	fmt.Fprintf(tp.stdout, "tool server (each engine's --tool-server): %s\n", env.ToolServer)
	path := ""
	if tp.template != "" {
		var err error
		if path, err = tp.write(env); err != nil {
			return err
		}
		fmt.Fprintf(tp.stdout, "wrote %s from %s\n", path, tp.template)
	}
	if tp.cmd != "" {
		if err := tp.start(path); err != nil {
			return err
		}
	}
	fmt.Fprintf(tp.stdout, "waiting up to %s for %s to answer\n", tp.readyTimeout, env.Target)
	return nil
}

// write fills the template and writes the configuration, returning its absolute path.
func (tp *targetProcess) write(env TargetEnv) (string, error) {
	out := tp.out
	if out == "" {
		out = strings.TrimSuffix(tp.template, ".tmpl")
		if out == tp.template {
			out += ".out"
		}
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	t, err := template.New(filepath.Base(tp.template)).Option("missingkey=error").ParseFiles(tp.template)
	if err != nil {
		return "", fmt.Errorf("config template: %w", err)
	}
	var b strings.Builder
	if err := t.Execute(&b, templateData{TargetEnv: env, Dir: filepath.Dir(out)}); err != nil {
		return "", fmt.Errorf("config template: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// start runs the command in a process group of its own.
func (tp *targetProcess) start(config string) error {
	c := exec.Command("sh", "-c", tp.cmd)
	c.Env = append(os.Environ(), "FENCEGATE_CHAOS_CONFIG="+config)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return fmt.Errorf("target command: %w", err)
	}
	fmt.Fprintf(tp.stdout, "started %q (pid %d)\n", tp.cmd, c.Process.Pid)
	tp.proc, tp.exited = c, make(chan struct{})
	go func() {
		tp.err = c.Wait()
		close(tp.exited)
	}()
	// A command that fails at once (a configuration the target refuses) says so now
	// rather than as a timeout.
	select {
	case <-tp.exited:
		if tp.err != nil {
			return fmt.Errorf("target command %q: %w", tp.cmd, tp.err)
		}
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// stop ends the command's process group if it still runs.
func (tp *targetProcess) stop() {
	if tp.proc == nil {
		return
	}
	select {
	case <-tp.exited:
		return
	default:
	}
	pgid := tp.proc.Process.Pid // the group's id: it leads a group of its own
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(tp.stdout, "stopping the target command: %v\n", err)
	}
	select {
	case <-tp.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-tp.exited
	}
	fmt.Fprintf(tp.stdout, "stopped the target command (pid %d)\n", pgid)
}

package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, or FENCEGATE_CHROMIUM; "" when there is none.
func chromiumPath() string {
	if p := os.Getenv("FENCEGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserAttempt is an attempt of the drawing as the browser laid it out.
type browserAttempt struct {
	N         string  `json:"n"`
	Replica   string  `json:"replica"`
	EndReason string  `json:"reason"`
	Left      float64 `json:"left"`
	Right     float64 `json:"right"`
}

// browserRequest is what a request's page shows once the browser rendered it.
type browserRequest struct {
	Attempts []browserAttempt `json:"attempts"`
	// Boundary is the x of the drawn boundary line (-1: none); its label's text beside.
	Boundary      float64 `json:"boundary"`
	BoundaryLabel string  `json:"boundaryLabel"`
	ErrorCode     string  `json:"errorCode"`
	TableRows     int     `json:"tableRows"`
	TraceLink     string  `json:"traceLink"`
	SVGWidth      float64 `json:"svgWidth"`
}

// readRequestPage reads the rendered page: where the bars and the boundary line are on the
// screen, and the texts a reader sees.
const readRequestPage = `(() => {
  const box = (el) => el.getBoundingClientRect();
  const attempts = [...document.querySelectorAll('svg g.attempt')].map(g => {
    const r = box(g.querySelector('rect'));
    return {n: g.dataset.attempt, replica: g.dataset.replica, reason: g.querySelector('.lane-reason').textContent.trim(), left: r.left, right: r.right};
  });
  const line = document.querySelector('svg g.boundary line');
  const code = document.querySelector('dd.error-code');
  const link = document.querySelector('a.trace-download');
  return {attempts, boundary: line ? box(line).left + box(line).width / 2 : -1,
    boundaryLabel: line ? document.querySelector('svg g.boundary text').textContent : '',
    errorCode: code ? code.textContent.trim() : '', tableRows: document.querySelectorAll('table.attempts tr[data-attempt]').length,
    traceLink: link ? link.getAttribute('href') : '', svgWidth: box(document.querySelector('svg')).width};
})()`

// The console in a real browser (Debian's chromium, headless), against a gateway that has
// run a rerun, an interrupted and a failed request: the replicas are listed, the requests
// page lists the three, and each request's drawing lays out its attempts on their replicas,
// the delivery boundary inside the attempt that delivered, and the error code the client
// received.
// Screenshots go to FENCEGATE_CONSOLE_SCREENSHOTS (a temporary directory by default).
// Without chromium the test is skipped, except under CI.
func TestConsoleInABrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (apt-get install chromium); CI needs it for the console's browser test")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	shots := os.Getenv("FENCEGATE_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := newConsoleScene(t, false)
	base := sc.e.admin.URL

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-proxy-server", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 800))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first call starts the browser, which lives as long as that call's context: it
	// gets no timeout of its own (the test binary's bounds it).
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()

	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), png, 0o644)
		})
	}
	shootElement := func(name, css string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.Screenshot(chromedp.CSS(css))(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), png, 0o644)
		})
	}
	eval := func(expr string, into any) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			v, err := chromedp.Evaluate[json.RawMessage](expr)(ctx, tg)
			if err != nil {
				return err
			}
			return json.Unmarshal(v, into)
		})
	}

	// The pools and replicas.
	var replicas []string
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-replica]`)),
		eval(`[...document.querySelectorAll('tr[data-replica]')].map(r => r.dataset.replica + ' ' + r.dataset.state)`, &replicas),
		shoot("console-pools.png")); err != nil {
		t.Fatal(err)
	}
	if len(replicas) != len(sc.e.sims) {
		t.Errorf("replicas shown: %v", replicas)
	}
	for i, r := range replicas {
		if !strings.HasPrefix(r, sc.e.sims[i].Name()+" ") {
			t.Errorf("replica %d shown as %q, want %s", i, r, sc.e.sims[i].Name())
		}
	}

	// The requests that did not complete plainly.
	var listedIDs []string
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/requests"), chromedp.WaitVisible(chromedp.CSS(`table.requests`)),
		eval(`[...document.querySelectorAll('tr[data-request]')].map(r => r.dataset.request)`, &listedIDs),
		shoot("console-requests.png")); err != nil {
		t.Fatal(err)
	}
	if want := []string{sc.failed, sc.interrupted, sc.rerun}; !slices.Equal(listedIDs, want) {
		t.Errorf("requests listed: %v, want %v", listedIDs, want)
	}

	// Each request's drawing, reached by its link in the list.
	for _, id := range []string{sc.interrupted, sc.rerun, sc.failed} {
		rec := sc.recs[id]
		var got browserRequest
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/requests"), chromedp.WaitVisible(chromedp.CSS(`table.requests`)),
			chromedp.Click(chromedp.CSS(`tr[data-request="`+id+`"] a`)), chromedp.WaitVisible(chromedp.CSS(`svg.timeline-drawing`)),
			eval(readRequestPage, &got), shoot(id+".png"), shootElement(id+"-timeline.png", "section.timeline")); err != nil {
			t.Fatal(err)
		}
		if len(got.Attempts) != len(rec.Attempts) || got.TableRows != len(rec.Attempts) || got.SVGWidth < 300 {
			t.Fatalf("%s: %d attempts drawn, %d in the table (drawing %.0f px wide); the journal has %d", id, len(got.Attempts), got.TableRows, got.SVGWidth, len(rec.Attempts))
		}
		delivering := -1
		for i, a := range rec.Attempts {
			d := got.Attempts[i]
			if d.N != itoa(a.N) || d.Replica != a.Replica || (a.EndReason != "" && d.EndReason != a.EndReason) || d.Right <= d.Left {
				t.Errorf("%s: attempt %d drawn %+v; the journal has %d on %s ending %q", id, i+1, d, a.N, a.Replica, a.EndReason)
			}
			if i > 0 && d.Left < got.Attempts[i-1].Right-1 {
				t.Errorf("%s: attempt %d drawn starting at %.1f, before attempt %d ended at %.1f", id, a.N, d.Left, i, got.Attempts[i-1].Right)
			}
			if got.Boundary >= d.Left-1 && got.Boundary <= d.Right+1 {
				delivering = i
			}
		}
		// The boundary is drawn inside the last attempt: the one whose answer the client got;
		// a request that delivered nothing has none.
		switch {
		case !rec.FirstDeltaSent && got.Boundary >= 0:
			t.Errorf("%s delivered nothing, but a boundary is drawn at %.1f", id, got.Boundary)
		case rec.FirstDeltaSent && (got.Boundary < 0 || delivering != len(rec.Attempts)-1 || got.BoundaryLabel != "delivery boundary"):
			t.Errorf("%s: boundary at %.1f (%q) in attempt %d; attempts %+v", id, got.Boundary, got.BoundaryLabel, delivering+1, got.Attempts)
		}
		if code := rec.errorCode(); !strings.HasPrefix(got.ErrorCode, code) || (code == "") != (got.ErrorCode == "") {
			t.Errorf("%s: error code shown %q, the journal has %q", id, got.ErrorCode, code)
		}
		if got.TraceLink != "/ui/requests/"+id+"/trace" {
			t.Errorf("%s: trace link %q", id, got.TraceLink)
		}
	}
	if rec := sc.recs[sc.interrupted]; rec.errorCode() != "upstream_decode_interrupted" {
		t.Errorf("the interrupted request ended with %q", rec.errorCode())
	}
	t.Logf("screenshots in %s", shots)
}

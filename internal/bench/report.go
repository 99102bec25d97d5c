package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// WriteText writes the report as tables for a person: one run in detail, or with
// several targets or rounds, every run in a line, then the medians and the ratios to
// the baseline.
func (rep *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "fencegate bench: %s\n\n", rep.Load.describe())
	if len(rep.Targets) == 1 && len(rep.Targets[0].Runs) == 1 {
		writeRun(bw, rep.Targets[0].Runs[0])
	} else {
		rep.writeComparison(bw)
	}
	return bw.Flush()
}

// describe is the load in one line.
func (l Load) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, model %s, max_tokens %d, concurrency %d, ", l.API, l.Model, l.MaxTokens, l.Concurrency)
	if l.PromptBytes > 0 {
		fmt.Fprintf(&b, "bodies of up to %d bytes, ", l.PromptBytes)
	}
	switch {
	case l.Requests > 0 && l.DurationSeconds > 0:
		fmt.Fprintf(&b, "%d requests or %s per run", l.Requests, fmtSeconds(l.DurationSeconds))
	case l.Requests > 0:
		fmt.Fprintf(&b, "%d requests per run", l.Requests)
	default:
		fmt.Fprintf(&b, "%s per run", fmtSeconds(l.DurationSeconds))
	}
	if l.Warmup > 0 {
		fmt.Fprintf(&b, " (warmup %d)", l.Warmup)
	}
	if l.Rounds > 1 {
		fmt.Fprintf(&b, ", %d rounds", l.Rounds)
	}
	return b.String()
}

func writeRun(w io.Writer, r *Result) {
	fmt.Fprintf(w, "target    %s\n", r.Endpoint)
	fmt.Fprintf(w, "requests  %d succeeded, %d failed in %s: %s requests/s\n",
		r.Succeeded, r.Failed, fmtSeconds(r.ElapsedSeconds), fmtNumber(r.RequestsPerSecond))
	fmt.Fprintf(w, "tokens    %d output tokens: %s tokens/s\n\n", r.OutputTokens, fmtNumber(r.OutputTokensPerSecond))
	rows := [][]string{{"", "count", "p50", "p90", "p99", "p99.9", "max", "mean"}}
	for _, p := range []struct {
		name string
		p    Percentiles
	}{{"time to first token", r.TTFT}, {"inter-token gap", r.InterToken}, {"request latency", r.Latency}} {
		rows = append(rows, []string{p.name, strconv.Itoa(p.p.Count),
			fmtMs(p.p.P50, p.p.Count), fmtMs(p.p.P90, p.p.Count), fmtMs(p.p.P99, p.p.Count),
			fmtMs(p.p.P999, p.p.Count), fmtMs(p.p.Max, p.p.Count), fmtMs(p.p.Mean, p.p.Count)})
	}
	writeTable(w, rows)
	fmt.Fprintln(w)
	if ps := r.Process; ps != nil {
		since := "this run's"
		if ps.PeakSince != "run" {
			since = "since the process started"
		}
		fmt.Fprintf(w, "server    pid %d: cpu %s (%.2f cores; user %s, system %s), %s per request (user %s); peak RSS %s (%s)\n",
			ps.PID, fmtSeconds(ps.CPUSeconds), ps.CPUCores, fmtSeconds(ps.CPUUserSeconds), fmtSeconds(ps.CPUSystemSeconds),
			fmtMs(ps.CPUPerRequestMs, r.Requests), fmtMs(ps.UserCPUPerRequestMs, r.Requests), fmtBytes(ps.PeakRSSBytes), since)
	}
	if c := r.Client; c != nil {
		fmt.Fprintf(w, "client    cpu %s (%.2f cores)\n", fmtSeconds(c.CPUSeconds), c.CPUCores)
	}
	writeErrors(w, "errors    ", r.Errors)
}

func writeErrors(w io.Writer, prefix string, errs []ErrorCount) {
	if len(errs) == 0 {
		fmt.Fprintf(w, "%snone\n", prefix)
		return
	}
	rows := make([][]string, len(errs))
	for i, e := range errs {
		rows[i] = []string{prefix, strconv.Itoa(e.Count), errorLabel(e)}
		prefix = strings.Repeat(" ", len(prefix))
	}
	writeTable(w, rows)
}

func errorLabel(e ErrorCount) string {
	if e.Status == 0 {
		return "no response: " + e.Code
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Code)
}

// comparisonColumns are the metrics of the median and ratio tables.
var comparisonColumns = []struct{ metric, title string }{
	{"requests_per_second", "req/s"},
	{"output_tokens_per_second", "tokens/s"},
	{"ttft_p50_ms", "ttft p50"},
	{"ttft_p99_ms", "ttft p99"},
	{"inter_token_p50_ms", "gap p50"},
	{"inter_token_p99_ms", "gap p99"},
	{"inter_token_p99_9_ms", "gap p99.9"},
	{"cpu_per_request_ms", "cpu/req"},
	{"user_cpu_per_request_ms", "user/req"},
	{"cpu_per_1k_tokens_ms", "cpu/1k tok"},
	{"peak_rss_bytes", "peak RSS"},
	{"failed", "failed"},
}

func (rep *Report) writeComparison(w io.Writer) {
	rows := [][]string{{"target", "round", "req/s", "tokens/s", "ttft p50", "gap p50", "gap p99", "cpu/req", "failed"}}
	for round := 1; round <= rep.Load.Rounds; round++ {
		// In the order the round ran them.
		var runs []*Result
		for _, t := range rep.Targets {
			for _, r := range t.Runs {
				if r.Round == round {
					runs = append(runs, r)
				}
			}
		}
		sortByStart(runs)
		for _, r := range runs {
			cpu := "—"
			if r.Process != nil {
				cpu = fmtMs(r.Process.CPUPerRequestMs, r.Requests)
			}
			rows = append(rows, []string{r.URL, strconv.Itoa(round), fmtNumber(r.RequestsPerSecond), fmtNumber(r.OutputTokensPerSecond),
				fmtMs(r.TTFT.P50, r.TTFT.Count), fmtMs(r.InterToken.P50, r.InterToken.Count), fmtMs(r.InterToken.P99, r.InterToken.Count),
				cpu, strconv.Itoa(r.Failed)})
		}
	}
	writeTableLeft(w, rows, 2)

	head := []string{fmt.Sprintf("median of %d", rep.Load.Rounds)}
	for _, c := range comparisonColumns {
		head = append(head, c.title)
	}
	fmt.Fprintln(w)
	rows = [][]string{head}
	for i, t := range rep.Targets {
		name := t.URL
		if i == 0 && len(rep.Targets) > 1 {
			name += " (baseline)"
		}
		row := []string{name}
		for _, c := range comparisonColumns {
			row = append(row, fmtMetric(c.metric, t.Median))
		}
		rows = append(rows, row)
	}
	writeTable(w, rows)

	if len(rep.Targets) > 1 {
		fmt.Fprintln(w)
		head[0] = "ratio to baseline"
		rows = [][]string{head}
		for _, t := range rep.Targets[1:] {
			row := []string{t.URL}
			for _, c := range comparisonColumns {
				if v, ok := t.Ratio[c.metric]; ok {
					row = append(row, fmt.Sprintf("%.2fx", v))
				} else {
					row = append(row, "—")
				}
			}
			rows = append(rows, row)
		}
		writeTable(w, rows)
	}
	for _, t := range rep.Targets {
		var all []ErrorCount
		for _, r := range t.Runs {
			all = append(all, r.Errors...)
		}
		if len(all) > 0 {
			sum := map[errorKey]int{}
			for _, e := range all {
				sum[errorKey{e.Status, e.Code}] += e.Count
			}
			fmt.Fprintf(w, "\nerrors of %s, all rounds:\n", t.URL)
			writeErrors(w, "  ", sortErrors(sum))
		}
	}
}

func sortByStart(runs []*Result) {
	slices.SortFunc(runs, func(a, b *Result) int { return a.Started.Compare(b.Started) })
}

func fmtMetric(name string, m map[string]float64) string {
	v, ok := m[name]
	if !ok {
		return "—"
	}
	for _, mt := range metrics {
		if mt.name != name {
			continue
		}
		switch mt.unit {
		case "ms":
			return fmtMs(v, 1)
		case "bytes":
			return fmtBytes(int64(v))
		}
	}
	return fmtNumber(v)
}

// writeTable writes rows with the first column aligned left and the others right.
func writeTable(w io.Writer, rows [][]string) { writeTableLeft(w, rows, 1) }

// writeTableLeft writes rows with the first left columns aligned left, the others right.
func writeTableLeft(w io.Writer, rows [][]string, left int) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			switch {
			case i == 0:
				b.WriteString(cell + pad)
			case i < left:
				b.WriteString("  " + cell + pad)
			default:
				b.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// fmtMs prints milliseconds in the unit that keeps three significant digits; "—" when
// there were no samples.
func fmtMs(ms float64, count int) string {
	switch {
	case count == 0:
		return "—"
	case ms == 0:
		return "0"
	case ms < 0.01:
		return fmt.Sprintf("%.1fµs", ms*1e3)
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1e3)
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmtSeconds(ms / 1e3)
}

func fmtSeconds(s float64) string {
	if s < 100 {
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}

func fmtNumber(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

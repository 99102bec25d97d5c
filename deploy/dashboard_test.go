package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is the shape of a Grafana dashboard, as much as the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasourceRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboardPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/fencegate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("fencegate.json: %v", err)
	}
	return d
}

// panels flattens rows.
func (d dashboard) panels() []dashboardPanel {
	var out []dashboardPanel
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// grafanaVariable matches $name, ${name} and ${name:format} in a query.
var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

// expandVariables replaces Grafana's variables with values PromQL accepts: a duration for
// the interval variables, a regular expression for the others (they sit in =~ matchers).
func expandVariables(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVariable.FindStringSubmatch(v)[1]
		if strings.HasPrefix(name, "__") {
			return "5m"
		}
		return ".*"
	})
}

// selector is one metric a query reads, with the labels it matches on.
type selector struct {
	metric string
	labels []string
}

// selectors parses a PromQL expression and returns the series selectors in it.
func selectors(expr string) ([]selector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{metric: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" {
				s.labels = append(s.labels, m.Name)
			}
		}
		out = append(out, s)
		return nil
	})
	return out, nil
}

// labelValuesQuery is Grafana's label_values(metric, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)$`)

// dashboardSelectors are the series every query and variable of the dashboard reads.
func dashboardSelectors(t *testing.T, d dashboard) map[string][]selector {
	t.Helper()
	out := map[string][]selector{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
		}
		m := labelValuesQuery.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
		}
		where := "variable " + v.Name
		out[where] = append(out[where], selector{metric: m[1], labels: []string{m[2]}})
	}
	for _, p := range d.panels() {
		for _, tg := range p.Targets {
			ss, err := selectors(expandVariables(tg.Expr))
			if err != nil {
				t.Fatalf("panel %q, query %s: %v\n%s", p.Title, tg.RefID, err, tg.Expr)
			}
			if len(ss) == 0 {
				t.Errorf("panel %q, query %s reads no metric", p.Title, tg.RefID)
			}
			where := "panel " + p.Title
			out[where] = append(out[where], ss...)
		}
	}
	return out
}

// rulesSelectors are the series every rule of the rules file reads.
func rulesSelectors(t *testing.T) map[string][]selector {
	t.Helper()
	out := map[string][]selector{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			ss, err := selectors(r.Expr)
			if err != nil {
				t.Fatalf("rule %s%s: %v", r.Alert, r.Record, err)
			}
			out["alert "+r.Alert] = append(out["alert "+r.Alert], ss...)
		}
	}
	return out
}

// The dashboard has what issue-free import needs: the data source, the model and the
// gateway as variables, every query on the data source variable.
func TestDashboardVariables(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title (the sidecar and provisioning key on the uid)")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s does not query the data source variable", v.Name)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "model": "query", "gateway": "query"} {
		if vars[name] != typ {
			t.Errorf("no %s variable %q", typ, name)
		}
	}
	ids := map[int]bool{}
	for _, p := range d.panels() {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q is not on the data source variable, or has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q, query %s: not on the data source variable", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `instance=~"$gateway"`) {
				t.Errorf("panel %q, query %s ignores the gateway variable", p.Title, tg.RefID)
			}
		}
	}
	// The panels issue operators asked for, by the metric each rests on.
	used := map[string]bool{}
	for _, ss := range dashboardSelectors(t, d) {
		for _, s := range ss {
			used[s.metric] = true
		}
	}
	for _, m := range []string{
		"fencegate_requests_total", "fencegate_time_to_first_token_seconds_bucket", "fencegate_reruns_total",
		"fencegate_attempts_total", "fencegate_replica_state", "fencegate_replica_ejections_total",
		"fencegate_replica_canary", "fencegate_journal_pending", "fencegate_limited_total",
		"fencegate_replica_engine_waiting", "fencegate_shed_total", "fencegate_model_available_replicas",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// familyOf maps a series name to its metric family: a histogram's _bucket, _sum and _count
// series belong to the histogram, a summary's _sum and _count to the summary.
func familyOf(name string, families map[string][]string) (string, bool) {
	if _, ok := families[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := families[base]; ok {
				return base, true
			}
		}
	}
	return "", false
}

// checkSelectorsExist checks every selector against the families a gateway exported:
// the metric exists, and every label the query matches on is one of its labels (or one
// Prometheus adds when it scrapes).
func checkSelectorsExist(t *testing.T, uses map[string][]selector, families map[string][]string) {
	t.Helper()
	for where, ss := range uses {
		for _, s := range ss {
			fam, ok := familyOf(s.metric, families)
			if !ok {
				t.Errorf("%s reads %s, which the gateway does not export", where, s.metric)
				continue
			}
			for _, l := range s.labels {
				switch {
				case l == "instance" || l == "job": // Prometheus adds them when it scrapes
				case l == "le" && fam != s.metric: // a histogram bucket's bound
				case slices.Contains(families[fam], l):
				default:
					t.Errorf("%s matches %s on label %q; it has %v", where, s.metric, l, families[fam])
				}
			}
		}
	}
}

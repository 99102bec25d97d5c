package deploy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool finds Prometheus' own rule checker (Debian's prometheus package). Without it the
// rules' tests are skipped on a developer's machine and fail under CI, which installs it
// (.ci/run).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed; CI installs Debian's prometheus package (.ci/run)")
		}
		t.Skip("promtool is not installed (Debian's prometheus package)")
	}
	return p
}

// rulesFile is the shape of a Prometheus rules file, as much as the tests read.
type rulesFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func loadRules(t *testing.T) rulesFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/fencegate-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f rulesFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("fencegate-rules.yaml: %v", err)
	}
	return f
}

// The rules file is valid for Prometheus, and each alert fires on the series its tests give
// it, and only then.
func TestPrometheusRules(t *testing.T) {
	bin := promtool(t)
	check := exec.Command(bin, "check", "rules", "fencegate-rules.yaml")
	check.Dir = "prometheus"
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	test := exec.Command(bin, "test", "rules", "fencegate-rules.test.yaml")
	test.Dir = "prometheus"
	if out, err := test.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Every alert has a test that expects it to fire, and every alert pages or makes a ticket
// with a summary an operator can act on.
func TestEveryAlertIsTested(t *testing.T) {
	rules := loadRules(t)
	b, err := os.ReadFile("prometheus/fencegate-rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles          []string `json:"rule_files"`
		EvaluationInterval string   `json:"evaluation_interval"`
		Tests              []struct {
			Interval      string           `json:"interval"`
			InputSeries   []map[string]any `json:"input_series"`
			AlertRuleTest []struct {
				EvalTime  string           `json:"eval_time"`
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.UnmarshalStrict(b, &tests); err != nil {
		t.Fatalf("fencegate-rules.test.yaml: %v", err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"fencegate-rules.yaml"}) {
		t.Errorf("the tests load %v, not fencegate-rules.yaml", tests.RuleFiles)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	var alerts int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: want a test where it fires and one where it must not", r.Alert)
			}
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, s)
			}
			if strings.TrimSpace(r.Annotations["summary"]) == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts in fencegate-rules.yaml")
	}
}

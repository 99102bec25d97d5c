package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/fencegate/fencegate/internal/config"
)

const chartDir = "helm/fencegate"

// renderChart renders the chart as `helm install prod ./deploy/helm/fencegate -n llm -f
// overrides` would, values.schema.json included, and returns the rendered templates by name.
func renderChart(t *testing.T, overrides string) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(overrides))
	if err != nil {
		t.Fatalf("the overrides: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "prod", Namespace: "llm", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// chartRelease is one rendering of the chart, decoded strictly.
type chartRelease struct {
	manifests
	notes string
}

func installChart(t *testing.T, overrides string) chartRelease {
	t.Helper()
	out, err := renderChart(t, overrides)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := chartRelease{manifests: newManifests()}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		text := out[name]
		if strings.Contains(text, "<no value>") {
			t.Errorf("%s renders a missing value:\n%s", name, text)
		}
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			r.notes = text
		case strings.HasSuffix(name, ".yaml"):
			r.add(t, name, []byte(text))
		}
	}
	return r
}

// The values the tests render the chart with besides its defaults: no autoscaler, no
// Redis, every monitoring object, two engine pools, a digest, chosen clients, tenant keys.
const chartVariant = `
image:
  digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
gateway:
  replicas: 3
  autoscaling: {enabled: false, minReplicas: 2, maxReplicas: 6, targetCPUUtilizationPercentage: 70}
  networkPolicy:
    enabled: true
    clients:
      - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}
    monitoring:
      - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}
  config:
    traces: {mode: errors}
    policy: {max_attempts: 3}
auth:
  admin_keys:
    - {id: ops, key_sha256: "1111111111111111111111111111111111111111111111111111111111111111"}
  keys:
    - {id: team-a, key_sha256: "2222222222222222222222222222222222222222222222222222222222222222", rpm: 600, models: [llama-3.1-8b]}
limits:
  max_body_bytes: 33554432
  redis: false
  on_backend_error: closed
engines:
  - name: qwen
    model: qwen2.5-7b-instruct
    source: Qwen/Qwen2.5-7B-Instruct
    replicas: 2
    image: vllm/vllm-openai:v0.11.0
    gpus: 1
    resources: {requests: {cpu: "4", memory: 24Gi}, limits: {memory: 32Gi}}
    shmSize: 8Gi
    modelsVolume: {emptyDir: {}}
    startupMinutes: 30
    preStopSeconds: 60
    pdb: {maxUnavailable: 1}
  - name: llama
    model: llama-3.1-8b
    source: meta-llama/Llama-3.1-8B-Instruct
    replicas: 4
    image: vllm/vllm-openai:v0.11.0
    extraArgs: [--max-model-len, "16384"]
    gpus: 2
    resources: {requests: {cpu: "8", memory: 48Gi}, limits: {memory: 64Gi}}
    shmSize: 16Gi
    modelsVolume: {persistentVolumeClaim: {claimName: llama-weights, readOnly: true}}
    startupMinutes: 45
    preStopSeconds: 90
    pdb: {maxUnavailable: 2}
    gateway:
      max_queue: 16
      canary: {every: 10m}
agent:
  port: 8001
  gomaxprocs: 1
  resources: {requests: {cpu: 200m, memory: 64Mi}, limits: {memory: 256Mi}}
monitoring:
  serviceMonitor: {enabled: true, interval: 15s, labels: {release: kube-prometheus-stack}}
  prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
  grafanaDashboard: {enabled: true, label: grafana_dashboard, labelValue: "1"}
`

func TestChartDefaults(t *testing.T) {
	checkChart(t, installChart(t, ""), false)
}

func TestChartVariant(t *testing.T) {
	r := installChart(t, chartVariant)
	checkChart(t, r, true)
	if len(r.hpas) != 0 || *r.deployments["prod-fencegate"].Spec.Replicas != 3 {
		t.Error("autoscaling off: want no HorizontalPodAutoscaler and the Deployment's own 3 replicas")
	}
	if len(r.monitors) != 1 || len(r.rules) != 1 {
		t.Errorf("%d ServiceMonitors and %d PrometheusRules, want one each", len(r.monitors), len(r.rules))
	}
}

// The chart's copies of the rules and the dashboard are the files under deploy/ (a chart
// can read only its own files): `cp deploy/prometheus/fencegate-rules.yaml
// deploy/grafana/fencegate.json deploy/helm/fencegate/files/` after changing them.
func TestChartFilesAreTheRulesAndTheDashboard(t *testing.T) {
	for src, copy := range map[string]string{
		"prometheus/fencegate-rules.yaml": chartDir + "/files/fencegate-rules.yaml",
		"grafana/fencegate.json":          chartDir + "/files/fencegate.json",
	} {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(copy)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s", copy, src)
		}
	}
}

// values.schema.json refuses what would deploy something unsafe or silently ignored.
func TestChartSchemaRefuses(t *testing.T) {
	for what, overrides := range map[string]string{
		"a key in plain text":        "auth: {admin_keys: [{id: ops, key: a-long-secret-in-clear-text}]}",
		"no admin key":               "auth: {admin_keys: []}",
		"an image that moves":        "image: {tag: latest}",
		"a misspelt value":           "gateway: {replicaz: 3}",
		"a negative GOMAXPROCS":      "agent: {gomaxprocs: -1}",
		"GOMAXPROCS in words":        "agent: {gomaxprocs: one}",
		"an unknown top-level value": "redis: {password: x}",
		"the store in the config":    "gateway: {config: {store: 'postgres://u:p@h/db'}}",
		"an admin port open to all":  "gateway: {networkPolicy: {monitoring: []}}",
		"an engine image that moves": "engines: [{name: a, model: m, source: s, replicas: 1, image: 'vllm/vllm-openai:latest', gpus: 1, resources: {requests: {cpu: '1', memory: 1Gi}, limits: {memory: 1Gi}}, shmSize: 1Gi, modelsVolume: {emptyDir: {}}, startupMinutes: 1, preStopSeconds: 1, pdb: {maxUnavailable: 1}}]",
		"a model name set twice":     "engines: [{name: a, model: m, source: s, replicas: 1, image: 'vllm/vllm-openai:v1', gpus: 1, resources: {requests: {cpu: '1', memory: 1Gi}, limits: {memory: 1Gi}}, shmSize: 1Gi, modelsVolume: {emptyDir: {}}, startupMinutes: 1, preStopSeconds: 1, pdb: {maxUnavailable: 1}, gateway: {name: other}}]",
	} {
		if _, err := renderChart(t, overrides); err == nil {
			t.Errorf("%s: the chart rendered", what)
		}
	}
}

// A change to the configuration changes the gateways' pod template, so they roll.
func TestChartConfigChangeRollsTheGateways(t *testing.T) {
	a := installChart(t, "")
	b := installChart(t, "gateway: {config: {policy: {max_attempts: 3}}}")
	sum := func(r chartRelease) string {
		return r.deployments["prod-fencegate"].Spec.Template.Annotations["checksum/config"]
	}
	if sum(a) == "" || sum(a) == sum(b) {
		t.Errorf("checksum/config %q and %q: want a checksum that changes with the configuration", sum(a), sum(b))
	}
}

// secretInURL finds a URL with a password in it.
var secretInURL = regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@`)

func checkChart(t *testing.T, r chartRelease, variant bool) {
	t.Helper()
	df := parseDockerfile(t)
	vals := chartValues(t, variant)
	const name = "prod-fencegate"
	d := r.deployments[name]
	cm := r.configMaps[name+"-config"]
	if d == nil || cm == nil {
		t.Fatalf("no Deployment %s or ConfigMap %s-config", name, name)
	}
	pod := d.Spec.Template
	checkLabelSelector(t, "Deployment "+name, d.Spec.Selector, pod.Labels)
	c := container(t, pod.Spec, "fencegate")
	checkLockedDown(t, pod.Spec, c, df.imageUID(t))
	checkImagesPinned(t, r.manifests)

	// The configuration: it loads as serve loads it, with the store and the Redis URL
	// from the environment, which Secrets fill.
	env := map[string]*corev1.SecretKeySelector{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("environment variable %s does not come from a Secret", e.Name)
			continue
		}
		env[e.Name] = e.ValueFrom.SecretKeyRef
	}
	text := cm.Data["fencegate.yaml"]
	if ref := env["FENCEGATE_STORE"]; ref == nil || ref.Name != vals.Secrets.Store.Name || ref.Key != vals.Secrets.Store.Key {
		t.Errorf("FENCEGATE_STORE comes from %+v, want the Secret %+v", ref, vals.Secrets.Store)
	}
	if strings.Contains(text, "backend_env") {
		ref := env["FENCEGATE_REDIS_URL"]
		if ref == nil || ref.Name != vals.Secrets.Redis.Name || ref.Key != vals.Secrets.Redis.Key {
			t.Errorf("FENCEGATE_REDIS_URL comes from %+v, want the Secret %+v", ref, vals.Secrets.Redis)
		}
		t.Setenv("FENCEGATE_REDIS_URL", "redis://:redis-password@redis.llm:6379/0")
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the ConfigMap's fencegate.yaml: %v\n%s", err, text)
	}
	cfg.Store = "postgres://fencegate:store-password@postgres.llm:5432/fencegate?sslmode=verify-full"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with FENCEGATE_STORE: %v", err)
	}
	if (vals.Limits.Redis) != strings.HasPrefix(cfg.Limits.Backend, "redis://") {
		t.Errorf("limits.redis %v, backend %q", vals.Limits.Redis, cfg.Limits.Backend)
	}
	if cfg.Limits.MaxBodyBytes != 32<<20 {
		t.Errorf("max_body_bytes %d, want the gateway's default 32 MiB", cfg.Limits.MaxBodyBytes)
	}

	// Nothing secret in any ConfigMap: no store, no URL with a password, no key in clear.
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["store"]; ok {
		t.Error("the ConfigMap sets store: the DSN belongs in the Secret (FENCEGATE_STORE)")
	}
	if cfg.Auth.HasPlaintextKeys() {
		t.Error("the ConfigMap holds an API key in clear")
	}
	for cmName, m := range r.configMaps {
		for k, v := range m.Data {
			if secretInURL.MatchString(v) || strings.Contains(v, "redis-password") || strings.Contains(v, "store-password") {
				t.Errorf("ConfigMap %s, %s holds a secret", cmName, k)
			}
		}
	}

	// Auth on, and the admin listener apart: on the pod network, so it needs admin keys,
	// which also make every /v1 request need a key.
	if len(cfg.Auth.AdminKeys) == 0 {
		t.Error("no admin key: the API would be open")
	}
	listenPort := hostPort(t, cfg.Listen)
	adminPort := hostPort(t, cfg.AdminListen)
	if adminPort == listenPort || config.IsLoopback(cfg.AdminListen) {
		t.Errorf("admin_listen %s: want a port of its own on the pod's address", cfg.AdminListen)
	}
	if portNumber(t, c, intstr.FromString("http")) != listenPort || portNumber(t, c, intstr.FromString("admin")) != adminPort {
		t.Error("container ports http and admin are not listen's and admin_listen's")
	}
	checkHTTPProbe(t, c, c.ReadinessProbe, "readiness", "/readyz", adminPort)
	checkHTTPProbe(t, c, c.LivenessProbe, "liveness", "/healthz", listenPort)

	// The configuration is mounted where serve reads it, as a directory; a new one rolls
	// the gateways.
	var mounted bool
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && vm.SubPath == "" &&
				path.Join(vm.MountPath, "fencegate.yaml") == flagValue(c.Args, "--config") {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("--config %s is not the ConfigMap's fencegate.yaml mounted as a directory", flagValue(c.Args, "--config"))
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(text, "\n")))
	if got := pod.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/config %q is not the configuration's SHA-256", got)
	}
	checkSecretFile(t, pod.Spec, c, cfg.AgentSecretFile, vals.Secrets.Agent)

	// Stopping: the kubelet's SIGKILL comes after preStop and the whole drain.
	grace := *pod.Spec.TerminationGracePeriodSeconds
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep")
	}
	if pre, drain := c.Lifecycle.PreStop.Sleep.Seconds, int64(cfg.Shutdown.DrainGrace.D().Seconds()); grace < pre+drain+5 {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %d + drain_grace %d + 5", grace, pre, drain)
	}

	// Services: the public one reaches the public listener only; the admin one is
	// ClusterIP, and the ServiceMonitor scrapes it and nothing else.
	pub, admin := r.services[name], r.services[name+"-admin"]
	if pub == nil || admin == nil {
		t.Fatalf("no Services %s and %s-admin", name, name)
	}
	for _, svc := range []*corev1.Service{pub, admin} {
		checkSelects(t, "Service "+svc.Name, svc.Spec.Selector, pod.Labels)
	}
	if len(pub.Spec.Ports) != 1 || portNumber(t, c, pub.Spec.Ports[0].TargetPort) != listenPort {
		t.Errorf("Service %s must reach the public listener alone", pub.Name)
	}
	if admin.Spec.Type != corev1.ServiceTypeClusterIP || len(admin.Spec.Ports) != 1 || portNumber(t, c, admin.Spec.Ports[0].TargetPort) != adminPort {
		t.Errorf("Service %s must be ClusterIP and reach the admin listener alone", admin.Name)
	}
	for _, sm := range r.monitors {
		checkLabelSelector(t, "ServiceMonitor "+sm.Name, &sm.Spec.Selector, admin.Labels)
		if s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector); err != nil || s.Matches(labels.Set(pub.Labels)) {
			t.Errorf("ServiceMonitor %s also selects the public Service", sm.Name)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != admin.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor %s endpoints %+v: want /metrics on the admin port", sm.Name, sm.Spec.Endpoints)
		}
	}

	// Disruptions and scaling.
	pdb := r.pdbs[name]
	if pdb == nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
		t.Fatalf("PodDisruptionBudget %s: want minAvailable of at least 1", name)
	}
	checkLabelSelector(t, "PodDisruptionBudget "+name, pdb.Spec.Selector, pod.Labels)
	if hpa := r.hpas[name]; hpa != nil {
		if d.Spec.Replicas != nil {
			t.Error("with a HorizontalPodAutoscaler the Deployment must not set replicas (each upgrade would reset them)")
		}
		if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != name || hpa.Spec.MinReplicas == nil ||
			int(*hpa.Spec.MinReplicas) <= pdb.Spec.MinAvailable.IntValue() {
			t.Errorf("HorizontalPodAutoscaler %s: want it to scale Deployment %s, from more gateways than the budget keeps", hpa.Name, name)
		}
	} else if !variant {
		t.Error("the defaults have no HorizontalPodAutoscaler")
	}

	// The gateways' own ingress: the admin port to the monitoring peers only.
	np := r.policies[name]
	if np == nil {
		t.Fatal("no NetworkPolicy for the gateways")
	}
	checkLabelSelector(t, "NetworkPolicy "+name, &np.Spec.PodSelector, pod.Labels)
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
			t.Fatalf("NetworkPolicy %s: want one port per rule", name)
		}
		if portNumber(t, c, *rule.Ports[0].Port) == adminPort && len(rule.From) == 0 {
			t.Errorf("NetworkPolicy %s admits everyone to the admin port", name)
		}
	}

	// Every container has a liveness probe and resource requests; every pod a readiness
	// probe.
	for _, dep := range r.deployments {
		ready := false
		for _, ct := range dep.Spec.Template.Spec.Containers {
			if ct.LivenessProbe == nil {
				t.Errorf("Deployment %s, container %s has no liveness probe", dep.Name, ct.Name)
			}
			ready = ready || ct.ReadinessProbe != nil
			checkResources(t, &ct)
		}
		if !ready {
			t.Errorf("Deployment %s has no readiness probe", dep.Name)
		}
	}

	// Each engine pool: vLLM on loopback behind its agent, found by the gateways through
	// its headless Service, with a disruption budget and a policy that admits the gateways.
	if len(vals.Engines) == 0 {
		t.Fatal("no engine pools in the values")
	}
	for _, e := range vals.Engines {
		checkEnginePool(t, r, cfg, pod.Labels, e.Name, e.Model, vals)
	}

	// Monitoring: the rules are the rules file's, the dashboard is the dashboard.
	for _, pr := range r.rules {
		got, _ := json.Marshal(pr.Spec)
		want := rulesFileJSON(t)
		if !jsonEqual(t, got, want) {
			t.Errorf("PrometheusRule %s is not deploy/prometheus/fencegate-rules.yaml:\n%s\n%s", pr.Name, got, want)
		}
	}
	if dash := r.configMaps[name+"-dashboard"]; dash != nil {
		want, err := os.ReadFile("grafana/fencegate.json")
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, []byte(dash.Data["fencegate.json"]), want) || dash.Labels["grafana_dashboard"] != "1" {
			t.Error("the dashboard ConfigMap is not deploy/grafana/fencegate.json with the grafana_dashboard label")
		}
	} else {
		t.Error("no dashboard ConfigMap")
	}
	if !strings.Contains(r.notes, "kubectl create secret generic "+vals.Secrets.Store.Name) {
		t.Error("the NOTES do not say how to create the store's Secret")
	}
}

func checkEnginePool(t *testing.T, r chartRelease, cfg *config.Config, gateways map[string]string, pool, model string, vals chartValuesFile) {
	t.Helper()
	name := "prod-fencegate-" + pool
	d := r.deployments[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	pod := d.Spec.Template
	checkLabelSelector(t, "Deployment "+name, d.Spec.Selector, pod.Labels)
	engine, agent := container(t, pod.Spec, "vllm"), container(t, pod.Spec, "agent")
	if len(engine.Ports) != 0 || flagValue(engine.Args, "--host") != "127.0.0.1" || flagValue(engine.Args, "--served-model-name") != model {
		t.Errorf("%s: the engine must serve %s on loopback only", name, model)
	}
	if engine.LivenessProbe == nil || engine.LivenessProbe.Exec == nil || engine.StartupProbe == nil ||
		!strings.Contains(strings.Join(engine.LivenessProbe.Exec.Command, " "), "127.0.0.1:"+flagValue(engine.Args, "--port")+"/health") {
		t.Errorf("%s: the engine's liveness must ask its own /health on loopback, after a startup probe", name)
	}
	checkLockedDown(t, pod.Spec, agent, parseDockerfile(t).imageUID(t))
	var procs []string
	for _, e := range agent.Env {
		if e.Name == "GOMAXPROCS" {
			procs = append(procs, e.Value)
		}
	}
	if want := vals.Agent.GOMAXPROCS; (want == 0 && len(procs) != 0) || (want != 0 && !slices.Equal(procs, []string{strconv.Itoa(want)})) {
		t.Errorf("%s: the agent's GOMAXPROCS %v, want %d (0: none set)", name, procs, want)
	}
	if e := flagValue(agent.Args, "--engine"); e != "http://127.0.0.1:"+flagValue(engine.Args, "--port") {
		t.Errorf("%s: the agent's --engine %s is not the engine", name, e)
	}
	agentPort := portNumber(t, agent, intstr.FromString("agent"))
	checkHTTPProbe(t, agent, agent.ReadinessProbe, "readiness", "/fencegate/v1/health", agentPort)
	checkSecretFile(t, pod.Spec, agent, flagValue(agent.Args, "--secret-file"), vals.Secrets.Agent)
	if cfg.AgentSecretFile != flagValue(agent.Args, "--secret-file") {
		t.Errorf("%s: the agent reads %s, the gateway %s", name, flagValue(agent.Args, "--secret-file"), cfg.AgentSecretFile)
	}

	var m *config.Model
	for i := range cfg.Models {
		if cfg.Models[i].Name == model {
			m = &cfg.Models[i]
		}
	}
	if m == nil || m.ReplicasFrom == nil || len(m.Replicas) != 0 {
		t.Fatalf("the gateway does not find model %s's engines through replicas_from", model)
	}
	rf := m.ReplicasFrom
	svc := r.services[rf.DNS]
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.PublishNotReadyAddresses {
		t.Fatalf("replicas_from.dns %q is not a headless Service of ready pods", rf.DNS)
	}
	checkSelects(t, "Service "+svc.Name, svc.Spec.Selector, pod.Labels)
	if int32(rf.Port) != agentPort || !rf.Agent || rf.Engine != "vllm" {
		t.Errorf("replicas_from %+v: want the agents' port %d, fenced, vllm", rf, agentPort)
	}
	pdb := r.pdbs[name]
	if pdb == nil || pdb.Spec.MaxUnavailable == nil {
		t.Fatalf("no PodDisruptionBudget %s with maxUnavailable", name)
	}
	checkLabelSelector(t, "PodDisruptionBudget "+name, pdb.Spec.Selector, pod.Labels)
	np := r.policies[name]
	if np == nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil {
		t.Fatalf("NetworkPolicy %s: want the gateways as the only peers", name)
	}
	checkLabelSelector(t, "NetworkPolicy "+name, &np.Spec.PodSelector, pod.Labels)
	checkLabelSelector(t, "NetworkPolicy "+name+" from", np.Spec.Ingress[0].From[0].PodSelector, gateways)
	// Pools must not select each other's pods.
	for other, od := range r.deployments {
		if s, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector); other != name && s.Matches(labels.Set(od.Spec.Template.Labels)) {
			t.Errorf("Deployment %s's selector also picks %s's pods", name, other)
		}
	}
}

// checkSecretFile checks that file is key secret.Key of Secret secret.Name, mounted as a
// directory and readable by the container's user through fsGroup.
func checkSecretFile(t *testing.T, spec corev1.PodSpec, c *corev1.Container, file string, secret secretRef) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path.Dir(file) || vm.SubPath != "" {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			if v.Secret.SecretName != secret.Name || path.Base(file) != secret.Key || len(v.Secret.Items) != 0 {
				t.Errorf("container %s: %s is not key %s of Secret %s", c.Name, file, secret.Key, secret.Name)
			}
			mode := int32(0o644)
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
			if mode&0o004 == 0 && (mode&0o040 == 0 || spec.SecurityContext == nil || spec.SecurityContext.FSGroup == nil) {
				t.Errorf("container %s cannot read %s (mode %o)", c.Name, file, mode)
			}
			return
		}
	}
	t.Errorf("container %s mounts no Secret at %s", c.Name, path.Dir(file))
}

func hostPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// secretRef is a Secret and key, as the chart's values name them.
type secretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// chartValuesFile is as much of the chart's values as the tests compare with.
type chartValuesFile struct {
	Secrets struct {
		Agent secretRef `json:"agent"`
		Store secretRef `json:"store"`
		Redis secretRef `json:"redis"`
	} `json:"secrets"`
	Limits struct {
		Redis bool `json:"redis"`
	} `json:"limits"`
	Engines []struct {
		Name  string `json:"name"`
		Model string `json:"model"`
	} `json:"engines"`
	Agent struct {
		GOMAXPROCS int `json:"gomaxprocs"`
	} `json:"agent"`
}

// chartValues reads the chart's values.yaml, with the variant's overrides over it.
func chartValues(t *testing.T, variant bool) chartValuesFile {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v chartValuesFile
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if variant {
		var over chartValuesFile
		if err := yaml.Unmarshal([]byte(chartVariant), &over); err != nil {
			t.Fatal(err)
		}
		v.Limits, v.Engines, v.Agent = over.Limits, over.Engines, over.Agent
	}
	return v
}

// rulesFileJSON is the rules file as JSON.
func rulesFileJSON(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("prometheus/fencegate-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return slices.Equal(xa, ya)
}

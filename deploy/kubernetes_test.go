package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/fencegate/fencegate/internal/config"
)

// manifests are the objects of deploy/kubernetes/*.yaml, by kind and name.
type manifests struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         map[string]*policyv1.PodDisruptionBudget
	policies     map[string]*networkingv1.NetworkPolicy
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	monitors     map[string]*monitoringv1.ServiceMonitor
	rules        map[string]*monitoringv1.PrometheusRule
}

func newManifests() manifests {
	return manifests{
		deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		policies: map[string]*networkingv1.NetworkPolicy{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		monitors: map[string]*monitoringv1.ServiceMonitor{}, rules: map[string]*monitoringv1.PrometheusRule{},
	}
}

// decodeManifest decodes one YAML document strictly into the API type its apiVersion and
// kind name: a field the type does not have (a typo, a wrong indentation) is an error, as
// is a field given twice. It returns nil for a document that is only comments.
func decodeManifest(doc []byte) (any, error) {
	var generic map[string]any
	if err := yaml.Unmarshal(doc, &generic); err != nil {
		return nil, err
	}
	if generic == nil {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
	default:
		return nil, fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	// encoding/json, under yaml.UnmarshalStrict, matches field names regardless of case;
	// the API server does not, and would drop "readinessprobe" as unknown. Decode the
	// same JSON again as the server does.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return obj, nil
}

// splitDocuments splits a multi-document YAML file as kubectl does.
func splitDocuments(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := newManifests()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m.add(t, file, b)
	}
	return m
}

// add decodes the documents of b (named where in errors) and files them by kind and name.
func (m manifests) add(t *testing.T, where string, b []byte) {
	t.Helper()
	docs, err := splitDocuments(b)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for i, doc := range docs {
		obj, err := decodeManifest(doc)
		if err != nil {
			t.Fatalf("%s, document %d: %v", where, i+1, err)
		}
		if obj == nil {
			continue
		}
		meta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
		name := meta.GetName()
		for _, msg := range validation.IsDNS1123Label(name) {
			t.Errorf("%s: name %q: %s", where, name, msg)
		}
		if meta.GetNamespace() != "" {
			t.Errorf("%s: %s sets a namespace; the manifests go wherever kubectl -n (or helm -n) puts them", where, name)
		}
		dup := false
		switch o := obj.(type) {
		case *appsv1.Deployment:
			_, dup = m.deployments[name]
			m.deployments[name] = o
		case *appsv1.StatefulSet:
			_, dup = m.statefulSets[name]
			m.statefulSets[name] = o
		case *corev1.Service:
			_, dup = m.services[name]
			m.services[name] = o
		case *corev1.ConfigMap:
			_, dup = m.configMaps[name]
			m.configMaps[name] = o
		case *corev1.Secret:
			_, dup = m.secrets[name]
			m.secrets[name] = o
		case *policyv1.PodDisruptionBudget:
			_, dup = m.pdbs[name]
			m.pdbs[name] = o
		case *networkingv1.NetworkPolicy:
			_, dup = m.policies[name]
			m.policies[name] = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			_, dup = m.hpas[name]
			m.hpas[name] = o
		case *monitoringv1.ServiceMonitor:
			_, dup = m.monitors[name]
			m.monitors[name] = o
		case *monitoringv1.PrometheusRule:
			_, dup = m.rules[name]
			m.rules[name] = o
		}
		if dup {
			t.Errorf("%s: %s is defined twice", where, name)
		}
	}
}

// The decoder is strict: what passes it is what the API server would accept field by field.
func TestManifestDecodingIsStrict(t *testing.T) {
	b, err := os.ReadFile("kubernetes/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ old, new string }{
		{"  replicas: 2\n", "  replicaz: 2\n"},                                                        // a misspelt field
		{"          readinessProbe:\n", "          readinessprobe:\n"},                                // wrong case
		{"      terminationGracePeriodSeconds: 40\n", "      terminationGracePeriodSeconds: forty\n"}, // wrong type
		{"  replicas: 2\n", "  replicas: 2\n  replicas: 3\n"},                                         // given twice
	} {
		mutated := strings.Replace(string(b), bad.old, bad.new, 1)
		if mutated == string(b) {
			t.Fatalf("%q is not in gateway.yaml", bad.old)
		}
		docs, err := splitDocuments([]byte(mutated))
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, doc := range docs {
			if _, err := decodeManifest(doc); err != nil {
				failed = true
			}
		}
		if !failed {
			t.Errorf("%q decoded without error", strings.TrimSpace(bad.new))
		}
	}
	loadManifests(t)
}

// gatewayConfig is the fencegate.yaml of the gateway's ConfigMap, loaded as serve loads it.
func gatewayConfig(t *testing.T, m manifests) *config.Config {
	t.Helper()
	cm := m.configMaps["fencegate-config"]
	if cm == nil {
		t.Fatal("no ConfigMap fencegate-config")
	}
	// limits.backend_env: the gateways' FENCEGATE_REDIS_URL, from the fencegate-redis
	// Secret (TestRedisIsTheGatewaysLimitsBackend checks the Deployment sets it so).
	t.Setenv("FENCEGATE_REDIS_URL", secretValue(t, m, "fencegate-redis", "url"))
	cfg, err := config.Parse([]byte(cm.Data["fencegate.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's fencegate.yaml: %v", err)
	}
	return cfg
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// portNumber resolves a probe's or a Service's target port against a container.
func portNumber(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, p.StrVal)
	return 0
}

// secretValue is one key of a Secret, from stringData or data.
func secretValue(t *testing.T, m manifests, name, key string) string {
	t.Helper()
	s := m.secrets[name]
	if s == nil {
		t.Fatalf("no Secret %q", name)
	}
	if v, ok := s.StringData[key]; ok {
		return v
	}
	if v, ok := s.Data[key]; ok {
		return string(v)
	}
	t.Fatalf("Secret %s has no key %q", name, key)
	return ""
}

// mountedSecretFile finds the Secret volume that provides file in container c of spec, and
// checks that the container's user can read it. It returns the Secret's name.
func mountedSecretFile(t *testing.T, m manifests, spec corev1.PodSpec, c *corev1.Container, file string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path.Dir(file) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			key := path.Base(file)
			secretValue(t, m, v.Secret.SecretName, key)
			mode := int32(0o644)
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
			// The kubelet writes Secret files owned by root, group fsGroup when set.
			readable := mode&0o004 != 0 || (mode&0o040 != 0 && spec.SecurityContext != nil && spec.SecurityContext.FSGroup != nil)
			if uid := runAsUser(spec, c); uid != nil && *uid == 0 {
				readable = true
			}
			if !readable {
				t.Errorf("container %s cannot read %s (mode %o)", c.Name, file, mode)
			}
			return v.Secret.SecretName
		}
	}
	t.Fatalf("container %s mounts no Secret volume at %s", c.Name, path.Dir(file))
	return ""
}

func runAsUser(spec corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

// checkLockedDown checks a container of the project's image: non-root, read-only root,
// no privilege escalation, no capabilities, and bounded resources.
func checkLockedDown(t *testing.T, spec corev1.PodSpec, c *corev1.Container, imageUID int64) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("container %s has no securityContext", c.Name)
	}
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
		(sc.RunAsNonRoot == nil && spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot)
	if !nonRoot {
		t.Errorf("container %s: runAsNonRoot is not set", c.Name)
	}
	if uid := runAsUser(spec, c); uid == nil || *uid != imageUID {
		t.Errorf("container %s: runAsUser %v, want the image's USER %d", c.Name, uid, imageUID)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s: readOnlyRootFilesystem is not set", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container %s: capabilities are not all dropped", c.Name)
	}
	checkResources(t, c)
}

func checkResources(t *testing.T, c *corev1.Container) {
	t.Helper()
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container %s: wants cpu and memory requests and a memory limit: %+v", c.Name, c.Resources)
	}
}

// checkSelects checks that selector picks the pods of template, and that the selector is
// not empty (an empty selector would pick every pod of the namespace).
func checkSelects(t *testing.T, what string, selector map[string]string, pod map[string]string) {
	t.Helper()
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(pod)) {
		t.Errorf("%s: selector %v does not select pods labelled %v", what, selector, pod)
	}
}

func checkLabelSelector(t *testing.T, what string, sel *metav1.LabelSelector, pod map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(pod)) {
		t.Errorf("%s: selector %v does not select pods labelled %v (%v)", what, sel, pod, err)
	}
}

func checkHTTPProbe(t *testing.T, c *corev1.Container, p *corev1.Probe, what, wantPath string, wantPort int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("container %s: no HTTP %s probe", c.Name, what)
		return
	}
	if p.HTTPGet.Path != wantPath || portNumber(t, c, p.HTTPGet.Port) != wantPort {
		t.Errorf("container %s: %s probe GET %s on port %v, want %s on %d", c.Name, what, p.HTTPGet.Path, p.HTTPGet.Port.String(), wantPath, wantPort)
	}
}

// flagValue is the value after flag in args.
func flagValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func TestGatewayDeployment(t *testing.T) {
	m := loadManifests(t)
	df := parseDockerfile(t)
	cfg := gatewayConfig(t, m)
	d := m.deployments["fencegate"]
	if d == nil {
		t.Fatal("no Deployment fencegate")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template
	checkLabelSelector(t, "Deployment fencegate", d.Spec.Selector, pod.Labels)
	c := container(t, pod.Spec, "fencegate")
	checkLockedDown(t, pod.Spec, c, df.imageUID(t))

	// The command is the image's default, spelt out; the configuration it names is the
	// ConfigMap's key, mounted there.
	cmds := commands[*instructionsCmd](df.final())
	if len(c.Command) != 0 || len(cmds) != 1 || !slices.Equal(c.Args, cmds[0].CmdLine) {
		t.Errorf("args %q, want the image's CMD", c.Args)
	}
	cfgPath := flagValue(c.Args, "--config")
	var mountedConfig bool
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == "fencegate-config" && vm.SubPath == "" &&
				path.Join(vm.MountPath, "fencegate.yaml") == cfgPath && len(v.ConfigMap.Items) == 0 {
				mountedConfig = true
			}
		}
	}
	if !mountedConfig {
		t.Errorf("--config %s is not the fencegate-config ConfigMap's fencegate.yaml, mounted as a directory (a subPath mount never sees updates)", cfgPath)
	}

	// Ports and probes.
	_, portText, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	listenPort, _ := strconv.Atoi(portText)
	if host, _, _ := net.SplitHostPort(cfg.Listen); host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("listen %s: a pod must listen on all its addresses to be reached", cfg.Listen)
	}
	if portNumber(t, c, intstr.FromString("http")) != int32(listenPort) {
		t.Errorf("container port http is not listen's %d", listenPort)
	}
	if !slices.Contains(exposedPorts(df), portText) {
		t.Errorf("the image does not EXPOSE %s", portText)
	}
	// The admin listener apart, on the pod network: /readyz is served there only, and its
	// admin calls need an admin key, which also turns authentication on for /v1/*.
	adminHost, adminPortText, err := net.SplitHostPort(cfg.AdminListen)
	if err != nil || adminHost != "0.0.0.0" || adminPortText == portText {
		t.Fatalf("admin_listen %q: want a port of its own on all the pod's addresses", cfg.AdminListen)
	}
	adminPort, _ := strconv.Atoi(adminPortText)
	if portNumber(t, c, intstr.FromString("admin")) != int32(adminPort) {
		t.Errorf("container port admin is not admin_listen's %d", adminPort)
	}
	if len(cfg.Auth.AdminKeys) == 0 || cfg.Auth.HasPlaintextKeys() {
		t.Error("want admin keys, as hashes: without a key the API is open")
	}
	if cfg.Limits.MaxBodyBytes != config.DefaultMaxBodyBytes {
		t.Errorf("limits.max_body_bytes %d, want the default %d", cfg.Limits.MaxBodyBytes, config.DefaultMaxBodyBytes)
	}
	checkHTTPProbe(t, c, c.ReadinessProbe, "readiness", "/readyz", int32(adminPort))
	checkHTTPProbe(t, c, c.LivenessProbe, "liveness", "/healthz", int32(listenPort))
	if cfg.TLS.Enabled() {
		t.Error("the example serves plain HTTP; with tls its probes would need scheme HTTPS")
	}

	// Stopping: the kubelet's SIGKILL comes after terminationGracePeriodSeconds, counted
	// from the start of preStop. The drain must end before it, plus the few seconds the
	// process takes to exit after the grace.
	const exitSlack = 5
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	var preStop int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Error("preStop is not a sleep action: the image has no shell to run a command")
		} else {
			preStop = c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	if drain := int64(cfg.Shutdown.DrainGrace.D().Seconds()); grace < preStop+drain+exitSlack {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %ds + shutdown.drain_grace %ds + %ds to exit", grace, preStop, drain, exitSlack)
	}

	// Secrets: the agent secret is mounted where the configuration reads it, and the
	// store's DSN comes from a Secret, never from the ConfigMap.
	if cfg.AgentSecretFile == "" {
		t.Fatal("the configuration sets no agent_secret_file")
	}
	if name := mountedSecretFile(t, m, pod.Spec, c, cfg.AgentSecretFile); name != "fencegate-agent" {
		t.Errorf("agent_secret_file comes from Secret %s, want fencegate-agent (the agents' secret)", name)
	}
	var storeRef *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "FENCEGATE_STORE" && e.ValueFrom != nil {
			storeRef = e.ValueFrom.SecretKeyRef
		}
	}
	if storeRef == nil {
		t.Fatal("FENCEGATE_STORE does not come from a Secret")
	}
	dsn := secretValue(t, m, storeRef.Name, storeRef.Key)
	withDSN := *cfg
	withDSN.Store = dsn
	if err := withDSN.Validate(); err != nil || !strings.HasPrefix(dsn, "postgres") {
		t.Errorf("the Secret's DSN is not a PostgreSQL store: %v", err)
	}
	if u, err := url.Parse(cfg.Store); err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		t.Errorf("the ConfigMap's store %q is not PostgreSQL: several gateways share one journal", cfg.Store)
	} else if _, has := u.User.Password(); has {
		t.Error("the ConfigMap's store holds a password; it belongs in the Secret")
	}

	// The Service and the disruption budget pick these pods, on the gateway's port.
	svc := m.services["fencegate"]
	if svc == nil {
		t.Fatal("no Service fencegate")
	}
	checkSelects(t, "Service fencegate", svc.Spec.Selector, pod.Labels)
	for _, p := range svc.Spec.Ports {
		if portNumber(t, c, p.TargetPort) != int32(listenPort) {
			t.Errorf("Service port %s targets %v, not the gateway's %d", p.Name, p.TargetPort.String(), listenPort)
		}
	}
	admin := m.services["fencegate-admin"]
	if admin == nil {
		t.Fatal("no Service fencegate-admin")
	}
	checkSelects(t, "Service fencegate-admin", admin.Spec.Selector, pod.Labels)
	if admin.Spec.Type != corev1.ServiceTypeClusterIP || len(admin.Spec.Ports) != 1 || portNumber(t, c, admin.Spec.Ports[0].TargetPort) != int32(adminPort) {
		t.Error("Service fencegate-admin must be ClusterIP and reach the admin listener alone")
	}
	pdb := m.pdbs["fencegate"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget fencegate")
	}
	checkLabelSelector(t, "PodDisruptionBudget fencegate", pdb.Spec.Selector, pod.Labels)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("minAvailable %v: want at least one gateway up and one allowed to go", pdb.Spec.MinAvailable)
	}
}

func TestEnginesAreReachedOnlyThroughTheirAgents(t *testing.T) {
	m := loadManifests(t)
	df := parseDockerfile(t)
	cfg := gatewayConfig(t, m)
	d := m.deployments["vllm"]
	if d == nil {
		t.Fatal("no Deployment vllm")
	}
	pod := d.Spec.Template
	checkLabelSelector(t, "Deployment vllm", d.Spec.Selector, pod.Labels)
	engine := container(t, pod.Spec, "vllm")
	agent := container(t, pod.Spec, "agent")
	if len(pod.Spec.Containers) != 2 {
		t.Errorf("%d containers, want the engine and its agent", len(pod.Spec.Containers))
	}

	// The engine: loopback only, no port on the pod network.
	if len(engine.Ports) != 0 {
		t.Errorf("the engine container declares ports %v: only the agent may be reachable", engine.Ports)
	}
	if host := flagValue(engine.Args, "--host"); host != "127.0.0.1" {
		t.Errorf("the engine listens on --host %q, want 127.0.0.1", host)
	}
	enginePort := flagValue(engine.Args, "--port")
	if engine.Resources.Limits.Name("nvidia.com/gpu", "").IsZero() {
		t.Error("the engine asks for no GPU")
	}
	checkResources(t, engine)

	// The agent: in front of that engine, listening on the pod's port, with the secret.
	if agent.Image != container(t, m.deployments["fencegate"].Spec.Template.Spec, "fencegate").Image {
		t.Errorf("the agent's image %s is not the gateway's", agent.Image)
	}
	if len(agent.Args) == 0 || agent.Args[0] != "agent" {
		t.Fatalf("agent args %q do not run fencegate agent", agent.Args)
	}
	if e := flagValue(agent.Args, "--engine"); e != "http://127.0.0.1:"+enginePort {
		t.Errorf("--engine %s is not the engine's http://127.0.0.1:%s", e, enginePort)
	}
	listenHost, listenPort, err := net.SplitHostPort(flagValue(agent.Args, "--listen"))
	if err != nil || listenHost != "0.0.0.0" {
		t.Errorf("--listen %q: want 0.0.0.0:PORT (%v)", flagValue(agent.Args, "--listen"), err)
	}
	agentPort, _ := strconv.Atoi(listenPort)
	if !slices.ContainsFunc(agent.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(agentPort) }) {
		t.Errorf("the agent container does not declare its port %d", agentPort)
	}
	if k := flagValue(agent.Args, "--engine-kind"); k != "vllm" {
		t.Errorf("--engine-kind %q, want vllm (the engine is vLLM)", k)
	}
	secretFile := flagValue(agent.Args, "--secret-file")
	if secretFile == "" {
		t.Fatal("the agent has no --secret-file: it would accept control calls from loopback only, and the gateway's are not")
	}
	if name := mountedSecretFile(t, m, pod.Spec, agent, secretFile); name != "fencegate-agent" {
		t.Errorf("the agent's secret comes from %s, want fencegate-agent (the gateway's)", name)
	}
	checkLockedDown(t, pod.Spec, agent, df.imageUID(t))
	// Probes cannot carry the agent's secret: they use the one path that needs none.
	checkHTTPProbe(t, agent, agent.ReadinessProbe, "readiness", "/fencegate/v1/health", int32(agentPort))

	// Stopping: both containers wait the same while the gateways drain the pod, and the
	// kubelet's grace covers the wait.
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	var waits []int64
	for _, c := range []*corev1.Container{engine, agent} {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("container %s has no preStop sleep: it would stop while the gateways still send it work", c.Name)
			continue
		}
		waits = append(waits, c.Lifecycle.PreStop.Sleep.Seconds)
	}
	if len(waits) == 2 && (waits[0] != waits[1] || grace <= waits[0]) {
		t.Errorf("preStop sleeps %v and grace %d: want equal sleeps shorter than the grace", waits, grace)
	}

	// The gateway discovers these pods through their headless Service, at the agent's
	// port, fenced.
	model := flagValue(engine.Args, "--served-model-name")
	var pool *config.Model
	for i := range cfg.Models {
		if cfg.Models[i].Name == model {
			pool = &cfg.Models[i]
		}
	}
	if pool == nil {
		t.Fatalf("the gateway serves no model %q (the engine's --served-model-name)", model)
	}
	rf := pool.ReplicasFrom
	if rf == nil || len(pool.Replicas) != 0 {
		t.Fatal("the gateway does not find the engines through replicas_from alone")
	}
	if rf.Port != agentPort || !rf.Agent || rf.Engine != "vllm" || rf.Scheme != "http" {
		t.Errorf("replicas_from %+v: want the agents' port %d, fenced, vllm, http", rf, agentPort)
	}
	svcName, _, _ := strings.Cut(rf.DNS, ".")
	svc := m.services[svcName]
	if svc == nil {
		t.Fatalf("no Service %q (replicas_from.dns)", rf.DNS)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s is not headless: its name would resolve to one virtual IP, not to each pod", svc.Name)
	}
	if svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s publishes pods that are not ready: a stopping pod would stay a replica", svc.Name)
	}
	checkSelects(t, "Service "+svc.Name, svc.Spec.Selector, pod.Labels)
	for _, p := range svc.Spec.Ports {
		if portNumber(t, agent, p.TargetPort) != int32(agentPort) {
			t.Errorf("Service %s port %s targets %v, not the agent's %d", svc.Name, p.Name, p.TargetPort.String(), agentPort)
		}
	}
}

func TestPostgresIsTheGatewaysStore(t *testing.T) {
	m := loadManifests(t)
	cfg := gatewayConfig(t, m)
	store, err := url.Parse(cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	sts := m.statefulSets["fencegate-postgres"]
	svc := m.services[store.Hostname()]
	if sts == nil || svc == nil {
		t.Fatalf("no StatefulSet fencegate-postgres, or no Service %q (the store's host)", store.Hostname())
	}
	pod := sts.Spec.Template
	checkLabelSelector(t, "StatefulSet fencegate-postgres", sts.Spec.Selector, pod.Labels)
	checkSelects(t, "Service "+svc.Name, svc.Spec.Selector, pod.Labels)
	pg := container(t, pod.Spec, "postgres")
	checkResources(t, pg)
	var served bool
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == store.Port() && portNumber(t, pg, p.TargetPort) == 5432 {
			served = true
		}
	}
	if !served {
		t.Errorf("Service %s does not serve PostgreSQL on the store's port %s", svc.Name, store.Port())
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range pg.Env {
		env[e.Name] = e
	}
	if env["POSTGRES_USER"].Value != store.User.Username() || env["POSTGRES_DB"].Value != strings.TrimPrefix(store.Path, "/") {
		t.Errorf("PostgreSQL user %q database %q, the store's %q %q", env["POSTGRES_USER"].Value, env["POSTGRES_DB"].Value, store.User.Username(), store.Path)
	}
	ref := env["POSTGRES_PASSWORD"].ValueFrom
	if ref == nil || ref.SecretKeyRef == nil {
		t.Fatal("POSTGRES_PASSWORD does not come from a Secret")
	}
	password := secretValue(t, m, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
	dsn, err := url.Parse(secretValue(t, m, "fencegate-store", "dsn"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := dsn.User.Password(); p != password || dsn.Host != store.Host || dsn.Path != store.Path {
		t.Errorf("the fencegate-store DSN does not reach this PostgreSQL with its password")
	}
}

// The agents and the journal admit the gateways only, on their one port. A policy that
// selected no pod, or other pods, would protect nothing.
func TestNetworkPoliciesAdmitTheGatewaysOnly(t *testing.T) {
	m := loadManifests(t)
	gateways := m.deployments["fencegate"].Spec.Template.Labels
	for _, tc := range []struct{ policy, workload, container string }{
		{"vllm-from-gateways", "vllm", "agent"},
		{"fencegate-postgres-from-gateways", "fencegate-postgres", "postgres"},
		{"fencegate-redis-from-gateways", "fencegate-redis", "redis"},
	} {
		np := m.policies[tc.policy]
		var pod corev1.PodTemplateSpec
		if d := m.deployments[tc.workload]; d != nil {
			pod = d.Spec.Template
		} else if s := m.statefulSets[tc.workload]; s != nil {
			pod = s.Spec.Template
		}
		if np == nil || pod.Labels == nil {
			t.Fatalf("no NetworkPolicy %s or workload %s", tc.policy, tc.workload)
		}
		checkLabelSelector(t, "NetworkPolicy "+np.Name, &np.Spec.PodSelector, pod.Labels)
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || len(np.Spec.Ingress) != 1 {
			t.Fatalf("NetworkPolicy %s: want one ingress rule", np.Name)
		}
		rule := np.Spec.Ingress[0]
		if len(rule.From) != 1 || rule.From[0].PodSelector == nil || rule.From[0].NamespaceSelector != nil || rule.From[0].IPBlock != nil {
			t.Fatalf("NetworkPolicy %s: want the gateways' pods as the only peers", np.Name)
		}
		checkLabelSelector(t, "NetworkPolicy "+np.Name+" from", rule.From[0].PodSelector, gateways)
		c := container(t, pod.Spec, tc.container)
		if len(rule.Ports) != 1 || len(c.Ports) != 1 || rule.Ports[0].Port == nil || portNumber(t, c, *rule.Ports[0].Port) != c.Ports[0].ContainerPort {
			t.Errorf("NetworkPolicy %s: want exactly the %s container's port", np.Name, c.Name)
		}
	}
}

// The gateways' own ingress: the admin port only from chosen peers, never from anyone.
func TestGatewayIngressPolicy(t *testing.T) {
	m := loadManifests(t)
	cfg := gatewayConfig(t, m)
	np := m.policies["fencegate-ingress"]
	if np == nil {
		t.Fatal("no NetworkPolicy fencegate-ingress")
	}
	d := m.deployments["fencegate"]
	checkLabelSelector(t, "NetworkPolicy fencegate-ingress", &np.Spec.PodSelector, d.Spec.Template.Labels)
	c := container(t, d.Spec.Template.Spec, "fencegate")
	_, listen, _ := net.SplitHostPort(cfg.Listen)
	_, admin, _ := net.SplitHostPort(cfg.AdminListen)
	covered := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			port := strconv.Itoa(int(portNumber(t, c, *p.Port)))
			covered[port] = true
			if port == admin && len(rule.From) == 0 {
				t.Error("the admin port is open to every peer")
			}
		}
	}
	if !covered[listen] || !covered[admin] || len(covered) != 2 {
		t.Errorf("the policy admits ports %v, want listen's %s and admin_listen's %s", covered, listen, admin)
	}
}

// The limits' Redis: the Deployment's FENCEGATE_REDIS_URL comes from a Secret, reaches this
// Redis, and carries the password the Redis server was given.
func TestRedisIsTheGatewaysLimitsBackend(t *testing.T) {
	m := loadManifests(t)
	cfg := gatewayConfig(t, m)
	if cfg.Limits.BackendEnv != "FENCEGATE_REDIS_URL" {
		t.Fatalf("limits.backend_env %q, want FENCEGATE_REDIS_URL", cfg.Limits.BackendEnv)
	}
	gw := container(t, m.deployments["fencegate"].Spec.Template.Spec, "fencegate")
	var ref *corev1.SecretKeySelector
	for _, e := range gw.Env {
		if e.Name == cfg.Limits.BackendEnv && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Name != "fencegate-redis" || ref.Key != "url" {
		t.Fatalf("%s does not come from Secret fencegate-redis, key url", cfg.Limits.BackendEnv)
	}
	u, err := url.Parse(secretValue(t, m, ref.Name, ref.Key))
	if err != nil {
		t.Fatal(err)
	}
	d := m.deployments["fencegate-redis"]
	svc := m.services[u.Hostname()]
	if d == nil || svc == nil {
		t.Fatalf("no Deployment fencegate-redis, or no Service %q (the URL's host)", u.Hostname())
	}
	pod := d.Spec.Template
	checkLabelSelector(t, "Deployment fencegate-redis", d.Spec.Selector, pod.Labels)
	checkSelects(t, "Service "+svc.Name, svc.Spec.Selector, pod.Labels)
	redis := container(t, pod.Spec, "redis")
	checkResources(t, redis)
	if redis.LivenessProbe == nil || redis.ReadinessProbe == nil {
		t.Error("the redis container needs liveness and readiness probes")
	}
	var served bool
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == u.Port() && portNumber(t, redis, p.TargetPort) == 6379 {
			served = true
		}
	}
	if !served {
		t.Errorf("Service %s does not serve Redis on the URL's port %s", svc.Name, u.Port())
	}
	// --requirepass $(REDIS_PASSWORD): the kubelet expands it from the variable's Secret.
	var pwRef *corev1.SecretKeySelector
	for _, e := range redis.Env {
		if e.Name == "REDIS_PASSWORD" && e.ValueFrom != nil {
			pwRef = e.ValueFrom.SecretKeyRef
		}
	}
	if pwRef == nil || flagValue(redis.Args, "--requirepass") != "$(REDIS_PASSWORD)" {
		t.Fatal("Redis does not take its --requirepass from a Secret")
	}
	if p, _ := u.User.Password(); p == "" || p != secretValue(t, m, pwRef.Name, pwRef.Key) {
		t.Error("the fencegate-redis URL does not carry the Redis server's password")
	}
}

// Every container has a liveness probe and resource requests, and every engine pool a
// disruption budget: a hung engine must give its GPU back.
func TestEveryContainerIsProbed(t *testing.T) {
	m := loadManifests(t)
	for _, d := range m.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.LivenessProbe == nil {
				t.Errorf("Deployment %s, container %s has no liveness probe", d.Name, c.Name)
			}
			checkResources(t, &c)
		}
	}
	pdb := m.pdbs["vllm"]
	if pdb == nil || pdb.Spec.MaxUnavailable == nil {
		t.Fatal("no PodDisruptionBudget vllm with maxUnavailable")
	}
	checkLabelSelector(t, "PodDisruptionBudget vllm", pdb.Spec.Selector, m.deployments["vllm"].Spec.Template.Labels)
}

// Every image names a version; "latest" or no tag would change under a running cluster.
func TestImagesArePinned(t *testing.T) {
	checkImagesPinned(t, loadManifests(t))
}

func checkImagesPinned(t *testing.T, m manifests) {
	t.Helper()
	var specs []corev1.PodSpec
	for _, d := range m.deployments {
		specs = append(specs, d.Spec.Template.Spec)
	}
	for _, s := range m.statefulSets {
		specs = append(specs, s.Spec.Template.Spec)
	}
	for _, spec := range specs {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			image := c.Image
			if _, digest, ok := strings.Cut(image, "@"); ok {
				if !strings.HasPrefix(digest, "sha256:") {
					t.Errorf("container %s: image %s has a malformed digest", c.Name, image)
				}
				continue
			}
			// The tag follows the last colon after the last slash (a registry may
			// have a port).
			last := image[strings.LastIndex(image, "/")+1:]
			_, tag, ok := strings.Cut(last, ":")
			if !ok || tag == "" || tag == "latest" {
				t.Errorf("container %s: image %s is not pinned to a version", c.Name, image)
			}
		}
	}
}

func exposedPorts(d dockerfile) []string {
	var ports []string
	for _, e := range commands[*instructionsExpose](d.final()) {
		for _, p := range e.Ports {
			p, _, _ = strings.Cut(p, "/")
			ports = append(ports, p)
		}
	}
	return ports
}

// Package deploy holds what operators install: the Kubernetes manifests under kubernetes/,
// the Helm chart under helm/fencegate, the alert rules under prometheus/ and the Grafana
// dashboard under grafana/ (the repository's Dockerfile builds the image they run).
//
// It has no code of its own. Its tests parse the Dockerfile with BuildKit's own parser,
// decode every manifest and every object the chart renders (with Helm's library) strictly
// into the Kubernetes API types, and check what the gateway relies on: a static non-root
// image without a shell, probes on /readyz and /healthz, a termination grace longer than
// the drain, engines reachable only through their agents, no secret in a ConfigMap, and a
// configuration that loads. They run promtool on the rules, check every metric the rules
// and the dashboard read against a running gateway's /metrics, and build and run the image
// with buildah and podman where those are installed. Their dependencies stay in the tests.
package deploy

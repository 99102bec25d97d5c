// Package deploy holds what runs fencegate outside a developer's machine: the Kubernetes
// manifests under kubernetes/ (the repository's Dockerfile builds the image they run).
//
// It has no code of its own. Its tests parse the Dockerfile with BuildKit's own parser
// and decode every manifest strictly into the Kubernetes API types, then check what the
// gateway relies on: a static non-root image without a shell, probes on /readyz and
// /healthz, a termination grace longer than the drain, engines reachable only through
// their agents, and a configuration that loads. Their dependencies stay in the tests.
package deploy

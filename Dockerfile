# syntax=docker/dockerfile:1

# fencegate: the gateway and the agent, one static binary on a distroless base. The image
# has no shell, no package manager and no HTTP client; it runs as a non-root user and
# carries the CA certificates that HTTPS replicas and PostgreSQL over TLS need.
#
#   docker build -t fencegate:dev .
#   docker run --rm -p 8080:8080 -v "$PWD/fencegate.yaml:/etc/fencegate/fencegate.yaml:ro" fencegate:dev
#
# See docs/deployment.md.

# At least the go line of go.mod.
ARG GO_VERSION=1.26.8

# The build runs on the builder's own platform and cross-compiles, so a multi-platform
# build (--platform linux/amd64,linux/arm64) needs no emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first: a change to the sources does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
# CGO_ENABLED=0: a static binary (the SQLite store is pure Go) that needs no C library on
# the final image. -trimpath: no paths of the build machine in the binary. -s -w: no symbol
# table or debug information. The VCS stamp (fencegate version) is written when .git is in
# the build context, which .dockerignore keeps.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/fencegate ./cmd/fencegate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fencegate /fencegate
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd
# (65532 is distroless' nonroot).
USER 65532:65532
EXPOSE 8080
# No HEALTHCHECK: there is nothing in the image to run one with, and orchestrators probe
# GET /healthz and GET /readyz themselves (Kubernetes ignores HEALTHCHECK).
ENTRYPOINT ["/fencegate"]
CMD ["serve", "--config", "/etc/fencegate/fencegate.yaml"]

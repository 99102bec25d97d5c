package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/request"
	"github.com/fencegate/fencegate/internal/upstream"
	"go.opentelemetry.io/otel/trace"
)

// services is the gateway as its requests see it (request.Server): the services they all
// share, each safe for concurrent use.
type services struct{ s *Server }

func (v services) Now() time.Time             { return v.s.now() }
func (v services) ID() string                 { return v.s.gatewayID }
func (v services) Log() *slog.Logger          { return v.s.log }
func (v services) Journal() request.Journal   { return v.s.journal }
func (v services) Store() request.Store       { return v.s.store }
func (v services) Engines() *http.Client      { return v.s.client }
func (v services) Attempts() *upstream.Client { return v.s.attempts }
func (v services) Tracer() trace.Tracer       { return v.s.tracer }
func (v services) Metrics() request.Metrics   { return v.s.metrics }
func (v services) LeaseTTL() time.Duration    { return v.s.boot.Leases.TTL.D() }

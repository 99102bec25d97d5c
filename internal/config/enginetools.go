package config

import (
	"fmt"
	"slices"
)

// RerunEngineTools says whether a request whose engine may have run one of its tools may be
// rerun (docs/design.md §5).
type RerunEngineTools string

const (
	// RerunEngineToolsNever (the default): once the body of a request with engine-run tools
	// may have reached an engine, it is rerun only after a failure that proves the engine
	// never started it.
	RerunEngineToolsNever RerunEngineTools = "never"
	// RerunIdempotentMCPServers: a request whose engine-run tools are all mcp tools of the
	// servers listed in policy.idempotent_mcp_servers is rerun as any other; the operator
	// declares that running their tools twice is harmless.
	RerunIdempotentMCPServers RerunEngineTools = "idempotent_mcp_servers"
)

// validateEngineTools checks policy.rerun_engine_tools and policy.idempotent_mcp_servers
// together: a list without the mode that uses it (or the mode without a list) is a mistake
// the operator should hear of, not a silent no-op.
func (p *Policy) validateEngineTools() error {
	switch p.RerunEngineTools {
	case "":
		p.RerunEngineTools = RerunEngineToolsNever
	case RerunEngineToolsNever, RerunIdempotentMCPServers:
	default:
		return fmt.Errorf("policy.rerun_engine_tools: %q is not one of %s, %s", p.RerunEngineTools, RerunEngineToolsNever, RerunIdempotentMCPServers)
	}
	for i, l := range p.IdempotentMCPServers {
		if l == "" {
			return fmt.Errorf("policy.idempotent_mcp_servers[%d]: empty server_label", i)
		}
		if slices.Index(p.IdempotentMCPServers, l) != i {
			return fmt.Errorf("policy.idempotent_mcp_servers[%d]: %q is listed twice", i, l)
		}
	}
	switch {
	case p.RerunEngineTools == RerunEngineToolsNever && len(p.IdempotentMCPServers) > 0:
		return fmt.Errorf("policy.idempotent_mcp_servers: listed, but policy.rerun_engine_tools is %s; set it to %s to rerun those servers' requests",
			RerunEngineToolsNever, RerunIdempotentMCPServers)
	case p.RerunEngineTools == RerunIdempotentMCPServers && len(p.IdempotentMCPServers) == 0:
		return fmt.Errorf("policy.rerun_engine_tools: %s needs policy.idempotent_mcp_servers, the server_labels of the MCP servers whose tools are idempotent",
			RerunIdempotentMCPServers)
	}
	return nil
}

// IdempotentServers is the list of MCP server_labels whose requests may be rerun, or nil
// when rerun_engine_tools is never.
func (p *Policy) IdempotentServers() []string {
	if p.RerunEngineTools != RerunIdempotentMCPServers {
		return nil
	}
	return p.IdempotentMCPServers
}

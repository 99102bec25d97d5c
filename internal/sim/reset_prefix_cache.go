package sim

import "net/http"

// serveResetPrefixCache is vLLM's POST /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1 only):
// the prefix cache is emptied, and AllBlocksCleared published, unless a request holds
// blocks — vLLM's reset_prefix_cache then only logs that it failed — and the answer is
// 200 with no body either way, as vLLM does not check whether the reset happened.
func (s *Server) serveResetPrefixCache(w http.ResponseWriter, _ *http.Request) {
	if running, _, _ := s.sched.load(); running == 0 {
		s.cache.clear()
	}
	w.WriteHeader(http.StatusOK)
}

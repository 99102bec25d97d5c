package agent

import "net/http"

// serveAttempts handles GET /fencegate/v1/attempts; ?ended=1 adds the
// recently ended attempts.
func (a *Agent) serveAttempts(w http.ResponseWriter, r *http.Request) {
	list := AttemptList{Attempts: a.Attempts()}
	if r.URL.Query().Get("ended") == "1" {
		list.Attempts = append(list.Attempts, a.recentlyEnded()...)
	}
	writeJSON(w, http.StatusOK, list)
}

package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ArmFault applies spec to each of the next count generation requests that
// carry no X-Sim-Fault header of their own (a header wins and leaves the
// armed count alone). Arming replaces whatever was armed before; count 0
// disarms. Items of spec restricted with ";on=" to another replica are kept
// but never fire here.
func (s *Server) ArmFault(spec string, count int) error {
	plan, err := parseFaultSpec(spec)
	if err != nil {
		return err
	}
	if count < 0 {
		return fmt.Errorf("sim: fault count must not be negative, got %d", count)
	}
	s.faultMu.Lock()
	s.armed, s.armedLeft = plan, count
	s.faultMu.Unlock()
	return nil
}

// takeFaults returns the faults for one arriving request: those of its
// X-Sim-Fault header, or else the armed ones while the armed count lasts,
// keeping only items meant for this replica.
func (s *Server) takeFaults(header string) (faultPlan, error) {
	if header != "" {
		plan, err := parseFaultSpec(header)
		if err != nil {
			return nil, err
		}
		return plan.forReplica(s.cfg.Name), nil
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.armedLeft == 0 {
		return nil, nil
	}
	s.armedLeft--
	return s.armed.forReplica(s.cfg.Name), nil
}

// armFaultRequest is the body of POST /sim/faults.
type armFaultRequest struct {
	Fault string `json:"fault"`
	Count *int   `json:"count"` // default 1
}

func (s *Server) serveArmFault(w http.ResponseWriter, r *http.Request) {
	var req armFaultRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		s.writeError(w, apiError{status: http.StatusBadRequest, message: "JSON decode error: " + err.Error()})
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if err := s.ArmFault(req.Fault, count); err != nil {
		s.writeError(w, apiError{status: http.StatusBadRequest, message: err.Error(), param: "fault"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"fault": req.Fault, "count": count})
}

func (s *Server) serveRecords(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Records())
}

package failover

var actionNames = [...]string{
	ActStartAttempt:   "start",
	ActEndAttempt:     "end",
	ActSendHeaders:    "headers",
	ActKeepalive:      "keepalive",
	ActRecordBoundary: "record-boundary",
	ActMarkFirstDelta: "mark-first-delta",
	ActHold:           "hold",
	ActDiscardHeld:    "discard-held",
	ActWriteHeld:      "write-held",
	ActWrite:          "write",
	ActFinish:         "finish",
	ActFail:           "fail",
	ActTryRerun:       "try-rerun",
}

func (k ActionKind) String() string {
	if int(k) < len(actionNames) && actionNames[k] != "" {
		return actionNames[k]
	}
	return "unknown"
}

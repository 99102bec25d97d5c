package lease

import "time"

// t0 is the origin of every test clock; at(ms) is t0 plus ms milliseconds.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

package lease

import (
	"encoding/json"
	"testing"
	"time"
)

func TestStatusJSONRoundTrip(t *testing.T) {
	for _, st := range []Status{Unknown, Renewed, Revoked, Expired, Ended, StaleEpoch} {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("marshal %v: %v", st, err)
		}
		var back Status
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if back != st {
			t.Errorf("round trip of %v gave %v (wire %s)", st, back, b)
		}
	}
	if b, _ := json.Marshal(Renewed); string(b) != `"renewed"` {
		t.Errorf("Renewed marshals as %s, want \"renewed\"", b)
	}
	var st Status
	if err := json.Unmarshal([]byte(`"alive"`), &st); err == nil {
		t.Error("unknown status name was accepted")
	}
}

func TestStatusFinal(t *testing.T) {
	want := map[Status]bool{Unknown: false, Renewed: false, Revoked: true, Expired: true, Ended: true, StaleEpoch: true}
	for st, final := range want {
		if st.Final() != final {
			t.Errorf("%v.Final() = %v, want %v", st, st.Final(), final)
		}
	}
}

func TestRequestOf(t *testing.T) {
	cases := map[string]string{
		"req_01JABC.a1":    "req_01JABC",
		"req_01JABC.a12":   "req_01JABC",
		"req_x.a1.a2":      "req_x.a1",
		"req_plain":        "req_plain",
		".a1":              ".a1",
		"req_with.dot.a3":  "req_with.dot",
		"req_01JABC.alpha": "req_01JABC",
	}
	for in, want := range cases {
		if got := RequestOf(in); got != want {
			t.Errorf("RequestOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	v := FormatHeader(7, 3*time.Second)
	if v != "epoch=7;ttl_ms=3000" {
		t.Fatalf("FormatHeader = %q", v)
	}
	epoch, ttl, err := ParseHeader(v)
	if err != nil || epoch != 7 || ttl != 3*time.Second {
		t.Fatalf("ParseHeader(%q) = %d, %v, %v", v, epoch, ttl, err)
	}
	epoch, ttl, err = ParseHeader(" ttl_ms=250 ; epoch=18446744073709551615; future=1")
	if err != nil || epoch != 1<<64-1 || ttl != 250*time.Millisecond {
		t.Fatalf("reordered header: %d, %v, %v", epoch, ttl, err)
	}
}

func TestHeaderRejects(t *testing.T) {
	for _, v := range []string{
		"", "epoch=1", "ttl_ms=100", "epoch=0;ttl_ms=100", "epoch=-1;ttl_ms=100",
		"epoch=1;ttl_ms=0", "epoch=1;ttl_ms=-5", "epoch=1;ttl_ms=600001", "epoch=x;ttl_ms=1",
		"epoch=1;ttl_ms=1;garbage",
	} {
		if _, _, err := ParseHeader(v); err == nil {
			t.Errorf("ParseHeader(%q) accepted", v)
		}
	}
}

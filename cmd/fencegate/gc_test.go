package main

import "testing"

func TestChooseGC(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	cases := []struct {
		name      string
		env       map[string]string
		memoryMax string
		want      gcSettings
	}{
		{"defaults, no cgroup limit", nil, "", gcSettings{percent: gatewayGCPercent}},
		{"unlimited cgroup", nil, "max\n", gcSettings{percent: gatewayGCPercent}},
		{"cgroup limit of 1 GiB", nil, "1073741824\n", gcSettings{percent: gatewayGCPercent, memoryLimit: 966367641}},
		{"operator's GOGC kept", map[string]string{"GOGC": "100"}, "1073741824", gcSettings{memoryLimit: 966367641}},
		{"operator's GOMEMLIMIT kept", map[string]string{"GOMEMLIMIT": "512MiB"}, "1073741824", gcSettings{percent: gatewayGCPercent}},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, "1073741824", gcSettings{}},
		{"garbage in memory.max", nil, "lots", gcSettings{percent: gatewayGCPercent}},
	}
	for _, c := range cases {
		if got := chooseGC(env(c.env), c.memoryMax); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

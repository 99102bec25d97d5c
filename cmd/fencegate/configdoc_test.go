package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/goccy/go-yaml"
)

// configKey is one key of the configuration file: its path as docs/configuration.md writes
// it (models[].replicas[].url) and its Go type.
type configKey struct {
	path string
	typ  reflect.Type
}

// configKeys lists every key of t by its yaml tags: nested mappings as a.b, lists of
// mappings as a[].b; lists of scalars and maps (fingerprint) are keys themselves.
func configKeys(t reflect.Type, prefix string) []configKey {
	var out []configKey
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := prefix + name
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), path+".")...)
		case ft.Kind() == reflect.Struct:
			out = append(out, configKeys(ft, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), path+"[].")...)
		default:
			out = append(out, configKey{path: path, typ: ft})
		}
	}
	return out
}

// splitKey splits a key path into its segments (models[], replicas[], url).
func splitKey(path string) []string { return strings.Split(path, ".") }

// resolveKey finds the value of a key in v: in a list, the first element that has it (a
// pointer that is nil has nothing).
func resolveKey(v reflect.Value, segs []string) (reflect.Value, bool) {
	if len(segs) == 0 {
		return v, true
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	name, list := strings.CutSuffix(segs[0], "[]")
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if tag != name {
			continue
		}
		f := v.Field(i)
		if !list {
			return resolveKey(f, segs[1:])
		}
		for j := range f.Len() {
			if r, ok := resolveKey(f.Index(j), segs[1:]); ok {
				return r, true
			}
		}
		return f, false
	}
	return v, false
}

// docBaseConfig is the smallest configuration that has every optional section, validated:
// its values are the defaults (a pool with a canary, one found in DNS, a key of each kind).
func docBaseConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`models:
  - name: m
    replicas: [{url: "http://127.0.0.1:1", kv_events: {endpoint: "tcp://127.0.0.1:5557"}}]
    canary: {}
    kv_events: {endpoint: "tcp://{host}:5557"}
  - name: d
    replicas_from: {dns: engines.internal, port: 8000}
auth:
  keys: [{id: k, key_sha256: "` + strings.Repeat("ab", 32) + `"}]
  admin_keys: [{id: a, key_sha256: "` + strings.Repeat("cd", 32) + `"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// configDocRow is one row of docs/configuration.md's tables.
type configDocRow struct {
	keys                    []string
	def, reloads, env, line string
}

// readConfigDoc reads the rows of docs/configuration.md's key tables: those whose first
// cell names keys in code font.
func readConfigDoc(t *testing.T) []configDocRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []configDocRow
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := tableCells(line)
		if len(cells) != 5 {
			t.Fatalf("want 5 cells (key, default, reloads, environment, what it is): %s", line)
		}
		r := configDocRow{def: cells[1], reloads: cells[2], env: cells[3], line: line}
		for _, k := range strings.Split(cells[0], ",") {
			r.keys = append(r.keys, strings.Trim(strings.TrimSpace(k), "`"))
		}
		rows = append(rows, r)
	}
	return rows
}

// tableCells splits a Markdown table row at its unescaped pipes.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// docs/configuration.md lists every key of the configuration structs, once, and no key
// that does not exist; each default written in code font is the value Validate gives the
// key when it is left out, and "—" one that stays empty; "restart" marks exactly the keys
// a reload refuses to change; the environment column names FENCEGATE_STORE for store alone.
func TestConfigurationDocListsEveryKey(t *testing.T) {
	rows := readConfigDoc(t)
	documented := map[string]configDocRow{}
	for _, r := range rows {
		for _, k := range r.keys {
			if _, dup := documented[k]; dup {
				t.Errorf("%s is documented twice", k)
			}
			documented[k] = r
		}
	}
	keys := configKeys(reflect.TypeFor[config.Config](), "")
	known := map[string]configKey{}
	for _, k := range keys {
		known[k.path] = k
		if _, ok := documented[k.path]; !ok {
			t.Errorf("docs/configuration.md does not document %s", k.path)
		}
	}
	for k := range documented {
		if _, ok := known[k]; !ok {
			t.Errorf("docs/configuration.md documents %s, which is no key", k)
		}
	}
	base := reflect.ValueOf(docBaseConfig(t)).Elem()
	restart := gateway.RestartOnlyKeys()
	for path, r := range documented {
		k, ok := known[path]
		if !ok {
			continue
		}
		got, found := resolveKey(base, splitKey(path))
		switch {
		case !found:
			t.Errorf("%s: not found in the base configuration", path)
		case strings.HasPrefix(r.def, "`"):
			lit, _, _ := strings.Cut(strings.TrimPrefix(r.def, "`"), "`")
			// The literal is decoded as the key's own type, as the file would be.
			holder := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: k.typ, Tag: `yaml:"v"`}}))
			if err := yaml.Unmarshal([]byte("v: "+lit), holder.Interface()); err != nil {
				t.Errorf("%s: default %q is not a value: %v", path, lit, err)
				continue
			}
			if want := holder.Elem().Field(0); !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Errorf("%s: documented default %s, the gateway's is %v", path, lit, got.Interface())
			}
		case strings.HasPrefix(r.def, "—") && !got.IsZero():
			t.Errorf("%s: documented without a default, yet it is %v when left out", path, got.Interface())
		}
		isRestart := slices.ContainsFunc(restart, func(p string) bool { return path == p || strings.HasPrefix(path, p+".") })
		if want := map[bool]string{true: "restart", false: "yes"}[isRestart]; r.reloads != want {
			t.Errorf("%s: reloads %q, want %q", path, r.reloads, want)
		}
		wantEnv := "—"
		if path == "store" {
			wantEnv = "`" + storeEnv + "`"
		}
		if r.env != wantEnv {
			t.Errorf("%s: environment %q, want %q", path, r.env, wantEnv)
		}
	}
	// The restart-only keys are keys (or sections) the document names.
	for _, p := range restart {
		if _, ok := documented[p]; !ok && !slices.ContainsFunc(keys, func(k configKey) bool { return strings.HasPrefix(k.path, p+".") }) {
			t.Errorf("restart-only %s is no documented key or section", p)
		}
	}
}

package openai

import "slices"

// Member is a member of a body's top-level object: its name, decoded, and its value
// as the exact bytes of the body (no copy), which start at Offset.
type Member struct {
	Name   string
	Value  []byte
	Offset int
}

// Members are the members of a body's top-level object in the order the body gives
// them. Parse refuses a body that names a member twice, so a name is found once.
type Members []Member

// Get returns the value of the member called name.
func (ms Members) Get(name string) ([]byte, bool) {
	if i := ms.index(name); i >= 0 {
		return ms[i].Value, true
	}
	return nil, false
}

// index returns the position of the member called name, or -1.
func (ms Members) index(name string) int {
	for i := range ms {
		if ms[i].Name == name {
			return i
		}
	}
	return -1
}

// present returns a member that is there and not null: optional fields sent as null
// count as unset, as they do for OpenAI.
func (ms Members) present(name string) ([]byte, bool) {
	v, ok := ms.Get(name)
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

// dupIndexAfter is the size from which the duplicate check indexes names in a map
// rather than comparing each new name with those before it.
const dupIndexAfter = 32

// names finds the first member whose name an earlier member already had.
type names struct {
	index map[string]struct{}
	dup   string
	found bool
}

// seen reports whether name is the name of a member of prev, the members before it,
// and remembers the first name seen twice.
func (n *names) seen(prev Members, name string) bool {
	seen := false
	switch {
	case n.index != nil:
		_, seen = n.index[name]
		n.index[name] = struct{}{}
	case len(prev) >= dupIndexAfter:
		n.index = make(map[string]struct{}, 2*len(prev))
		for _, m := range prev {
			n.index[m.Name] = struct{}{}
		}
		_, seen = n.index[name]
		n.index[name] = struct{}{}
	default:
		for _, m := range prev {
			if m.Name == name {
				seen = true
				break
			}
		}
	}
	if seen && !n.found {
		n.dup, n.found = name, true
	}
	return seen
}

// NamesOnly reports whether the object raw, a member's value that Parse accepted (such as
// stream_options), names no member but those of names, escaped names read as they decode.
func NamesOnly(raw []byte, names ...string) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	for _, m := range objectMembers(raw) {
		if !slices.Contains(names, m.Name) {
			return false
		}
	}
	return true
}

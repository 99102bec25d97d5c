package openai

// The prompt as text ("role: content\n" per message, see Request.Prompt) serves prefix
// affinity, which hashes its first bytes, and the cost estimate, which needs its length.
// Neither needs the whole text, and building it would copy most of the body: a
// rendering keeps the pieces that make up its first bytes — literals, and strings of
// the body still to be decoded — and counts the length of the rest. The text itself
// is only made, up to the limit, once the scan is over (render).

// piece is a part of the rendered prompt: a literal, or a string of the body (the
// bytes between its quotes) to be decoded.
type piece struct {
	lit string
	raw []byte
	n   int // decoded length
}

// rendering is a part of the prompt as pieces: those of its first limit bytes, and
// the length of all of it.
type rendering struct {
	pieces []piece
	n      int // rendered length so far, of kept and dropped pieces alike
	limit  int
}

func (r *rendering) add(p piece) {
	if r.n < r.limit {
		if r.pieces == nil {
			// A turn is four pieces (role, ": ", content, "\n"): one allocation, not three.
			r.pieces = make([]piece, 0, 4)
		}
		r.pieces = append(r.pieces, p)
	}
	r.n += p.n
}

func (r *rendering) lit(s string) { r.add(piece{lit: s, n: len(s)}) }

// str adds a string of the body, quotes included, whose decoded length is n. A string
// a fault cut short is left out: the scan is over, and its rendering unused.
func (r *rendering) str(quoted []byte, n int) {
	if len(quoted) < 2 {
		return
	}
	r.add(piece{raw: quoted[1 : len(quoted)-1], n: n})
}

// addAll adds what o rendered, the pieces o dropped included in the length.
func (r *rendering) addAll(o *rendering) {
	kept := 0
	for _, p := range o.pieces {
		r.add(p)
		kept += p.n
	}
	r.n += o.n - kept
}

// reset empties r for a new use, keeping its storage.
func (r *rendering) reset(limit int) {
	clear(r.pieces) // drop references into an earlier body
	r.pieces, r.n, r.limit = r.pieces[:0], 0, max(limit, 0)
}

// render joins the renderings and returns their first limit bytes and how many bytes
// of them it left out.
func render(limit int, parts ...*rendering) (string, int) {
	total := 0
	for _, r := range parts {
		total += r.n
	}
	keep := min(max(limit, 0), total)
	if keep == 0 {
		return "", total
	}
	// A decoded piece may overshoot keep by part of a character; the cut is by bytes,
	// as affinity hashes bytes.
	buf := make([]byte, 0, keep+4)
	for _, r := range parts {
		for _, p := range r.pieces {
			if len(buf) >= keep {
				break
			}
			if p.raw == nil {
				buf = append(buf, p.lit[:min(len(p.lit), keep-len(buf))]...)
			} else {
				buf = appendUnquoted(buf, p.raw, keep)
			}
		}
	}
	return string(buf[:keep]), total - keep
}

package console

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed style.css
var styleSheet string

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// css is the style sheet, inlined so a page is one response that works offline.
	"css": func() template.CSS { return template.CSS(styleSheet) },
	"timeTag": func(t time.Time) template.HTML {
		if t.IsZero() {
			return "—"
		}
		u := t.UTC()
		return template.HTML(fmt.Sprintf(`<time datetime="%s">%s</time>`, u.Format(time.RFC3339Nano), u.Format("2006-01-02 15:04:05.000 UTC")))
	},
	"dur":     Duration,
	"num":     func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"sub":     func(a, b float64) float64 { return a - b },
	"percent": func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
}

// pages are the console's pages, each the layout around its own template.
var pages = map[string]*template.Template{}

func init() {
	for _, name := range []string{"overview", "requests", "request", "error"} {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html"))
	}
}

// ErrorPage is a page that could not be shown: why, in the API's words (its error code).
type ErrorPage struct {
	Title, Code, Message string
}

// RenderOverview writes the pools and replicas page.
func RenderOverview(w io.Writer, o Overview) error { return render(w, "overview", o) }

// RenderRequests writes the list of requests that did not complete plainly.
func RenderRequests(w io.Writer, l RequestList) error { return render(w, "requests", l) }

// RenderRequest writes one request's timeline.
func RenderRequest(w io.Writer, tl Timeline) error { return render(w, "request", tl) }

// RenderError writes a page that says why the page asked for cannot be shown.
func RenderError(w io.Writer, e ErrorPage) error { return render(w, "error", e) }

func render(w io.Writer, page string, data any) error {
	if err := pages[page].Execute(w, data); err != nil {
		return fmt.Errorf("console: render %s: %w", page, err)
	}
	return nil
}

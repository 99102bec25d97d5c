package openai

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/errorsdoc"
)

// codeWord is what an error code looks like.
var codeWord = regexp.MustCompile(`^[a-z][a-z_]*[a-z]$`)

// errorsDocStances reads the x-should-retry column of docs/errors.md.
func errorsDocStances(t *testing.T) map[string]errorsdoc.Stance {
	t.Helper()
	doc, err := errorsdoc.Stances()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) < 40 {
		t.Fatalf("docs/errors.md: only %d codes found in its x-should-retry tables", len(doc))
	}
	return doc
}

// The x-should-retry of every error code is the one docs/errors.md gives it, and every
// code the table knows is in that document.
func TestShouldRetryMatchesErrorsDoc(t *testing.T) {
	doc := errorsDocStances(t)
	for code, d := range doc {
		if !KnownCode(code) {
			t.Errorf("%s is in docs/errors.md but not in the x-should-retry table", code)
			continue
		}
		if d.Value == errorsdoc.Event {
			continue
		}
		if got := strconv.FormatBool(ShouldRetry(&Error{Code: code})); got != d.Value {
			t.Errorf("%s: x-should-retry %s, docs/errors.md says %s", code, got, d.Value)
		}
	}
	for code := range shouldRetry {
		if _, ok := doc[code]; !ok {
			t.Errorf("%s has an x-should-retry but is not in docs/errors.md", code)
		}
	}
}

// Every error code the gateway writes as a literal is in the x-should-retry table (and so,
// by the test above, in docs/errors.md): a new code cannot be added without deciding
// whether the SDKs may resend it. The packages that answer clients are read: fields and
// variables named Code or code given a string literal, and the code results of functions
// that return one.
func TestEveryWrittenCodeIsDocumented(t *testing.T) {
	dirs := []string{"openai", "protocol", "failover", "request", "gateway"}
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join("..", d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, code := range literalCodes(f) {
				found[code] = name
			}
		}
	}
	if len(found) < 30 {
		t.Fatalf("only %d literal codes found: the scan has lost its way", len(found))
	}
	for code, file := range found {
		if !KnownCode(code) {
			t.Errorf("%s (written in %s) is not in the x-should-retry table and docs/errors.md", code, file)
		}
	}
}

// literalCodes returns the string literals f gives to a Code field or a code variable.
func literalCodes(f *ast.File) []string {
	var out []string
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil && codeWord.MatchString(s) {
				out = append(out, s)
			}
		}
	}
	isCode := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name == "code"
		case *ast.SelectorExpr:
			return x.Sel.Name == "Code"
		}
		return false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.KeyValueExpr:
			if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Code" {
				lit(x.Value)
			}
		case *ast.AssignStmt:
			if len(x.Lhs) == len(x.Rhs) {
				for i, l := range x.Lhs {
					if isCode(l) {
						lit(x.Rhs[i])
					}
				}
			}
		case *ast.FuncDecl:
			// A function whose results name a code: the literal at that position of
			// each of its returns.
			if x.Type.Results == nil || x.Body == nil {
				return true
			}
			pos, idx := -1, 0
			for _, field := range x.Type.Results.List {
				for _, name := range field.Names {
					if name.Name == "code" {
						pos = idx
					}
					idx++
				}
				if len(field.Names) == 0 {
					idx++
				}
			}
			if pos < 0 {
				return true
			}
			ast.Inspect(x.Body, func(n ast.Node) bool {
				if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == idx {
					lit(r.Results[pos])
				}
				return true
			})
		}
		return true
	})
	return out
}

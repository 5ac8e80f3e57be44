package simtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// configFields derives every key of the policy-file format from the
// config package's own source: the key lists its decoder accepts
// (policyFields, budgetFields, breakerFields, limiterFields, hedgeFields,
// adaptiveFields, nestedFields, and the literal lists of its fields
// calls), each as "section: key".
func configFields(t *testing.T) map[string]bool {
	fset := token.NewFileSet()
	files, _ := filepath.Glob("../config/*.go")
	out := map[string]bool{}
	strs := func(e ast.Expr) []string {
		var s []string
		ast.Inspect(e, func(n ast.Node) bool {
			if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
				v, _ := strconv.Unquote(b.Value)
				s = append(s, v)
			}
			return true
		})
		return s
	}
	common := []string{}
	consts := map[string]string{}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.CONST {
				for _, spec := range d.Specs {
					if vs := spec.(*ast.ValueSpec); len(vs.Values) == len(vs.Names) {
						for i, v := range vs.Values {
							if b, ok := v.(*ast.BasicLit); ok && b.Kind == token.STRING {
								consts[vs.Names[i].Name], _ = strconv.Unquote(b.Value)
							}
						}
					}
				}
			}
		}
	}
	for _, f := range parsed {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok || len(vs.Values) != 1 {
						continue
					}
					section := map[string]string{"policyFields": "policy", "hedgeFields": "hedge", "adaptiveFields": "hedge.adaptive",
						"nestedFields": "nested", "budgetFields": "budget", "breakerFields": "breaker", "limiterFields": "limiter", "breakerCommon": "breaker"}[vs.Names[0].Name]
					if section == "" {
						continue
					}
					if cl, ok := vs.Values[0].(*ast.CompositeLit); ok {
						if _, isMap := cl.Type.(*ast.MapType); isMap {
							for _, el := range cl.Elts {
								kv := el.(*ast.KeyValueExpr)
								var kind string
								switch k := kv.Key.(type) {
								case *ast.BasicLit:
									kind, _ = strconv.Unquote(k.Value)
								case *ast.Ident:
									kind = consts[k.Name]
								}
								for _, k := range strs(kv.Value) {
									out[section+"."+kind+": "+k] = true
								}
							}
							continue
						}
					}
					for _, k := range strs(vs.Values[0]) {
						if vs.Names[0].Name == "breakerCommon" {
							common = append(common, k)
							continue
						}
						out[section+": "+k] = true
					}
				}
			case *ast.FuncDecl:
				section := map[string]string{"backoff": "backoff", "retryOn": "retry_on", "Parse": "file"}[d.Name.Name]
				if section == "" {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "fields" && len(c.Args) > 2 {
							for _, k := range strs(c.Args[2]) {
								out[section+": "+k] = true
							}
						}
					}
					return true
				})
			}
		}
	}
	for _, kind := range []string{"consecutive", "count_window", "time_window"} {
		for _, k := range common {
			out["breaker."+kind+": "+k] = true
		}
	}
	if len(out) < 60 || !out["policy: hedge"] || !out["budget.ratio: throttle_cost"] || !out["limiter.sre: k"] {
		t.Fatalf("derived %d fields from config's source: %v", len(out), out)
	}
	return out
}

// Issue 34 item 2: every field a policy file can hold has a row in
// README.md's "What is simulated" table, saying how it is modelled; a
// field added to config's format without a row fails here.
func TestWhatIsSimulatedCoversEveryField(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "## What is simulated")
	if !ok {
		t.Fatal(`README.md has no "## What is simulated" section`)
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	rows := map[string][]string{} // section → rows
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		sec, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(cells[1]), "`"), "`")
		if len(cells) < 4 || strings.TrimSpace(cells[2]) == "" {
			t.Errorf("row %q says nothing about how it is modelled", line)
		}
		rows[sec] = append(rows[sec], cells[1])
	}
	for f := range configFields(t) {
		sec, key, _ := strings.Cut(f, ": ")
		found := false
		for _, r := range rows[sec] {
			if strings.Contains(r, "`"+key+"`") {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md's What is simulated table has no row for %s (a row starting with `%s` naming `%s`)", f, sec, key)
		}
	}
}

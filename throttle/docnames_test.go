package throttle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exported returns the exported top-level names (and methods, as
// Type.Method) declared in the non-test files of the package in dir.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
				names[name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}

// TestDocNamesExist (issue 31 item 24): every budget.Name, retry.Name and
// throttle.Name that the throttle and budget packages' sources name (in
// comments as in code) exists: throttle/adaptive.go named
// budget.IsAWSThrottle, which never did.
func TestDocNamesExist(t *testing.T) {
	pkgs := map[string]map[string]bool{
		"budget":   exported(t, "../budget"),
		"retry":    exported(t, "../retry"),
		"throttle": exported(t, "."),
		"awsretry": exported(t, "../awsretry"),
	}
	ref := regexp.MustCompile(`\b(budget|retry|throttle|awsretry)\.([A-Z]\w*(?:\.[A-Z]\w*)?)`)
	for _, dir := range []string{".", "../budget", "../awsretry"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			for _, at := range ref.FindAllStringSubmatchIndex(src, -1) {
				m := []string{src[at[0]:at[1]], src[at[2]:at[3]], src[at[4]:at[5]]}
				if strings.HasSuffix(src[max(0, at[0]-len("aws-sdk-go-v2 ")):at[0]], "aws-sdk-go-v2 ") {
					continue // the AWS SDK's own retry package
				}
				name := m[2]
				if pkgs[m[1]][name] {
					continue
				}
				if i := strings.IndexByte(name, '.'); i > 0 && pkgs[m[1]][name[:i]] {
					continue // a field or method reached through a type, e.g. retry.Policy.Budget
				}
				t.Errorf("%s names %s.%s, which does not exist", f, m[1], name)
			}
		}
	}
}

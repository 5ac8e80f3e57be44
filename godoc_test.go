package stormguard_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestGodocEveryExportedName walks every package of every module of this
// repository (the root and each directory with its own go.mod; testdata,
// internal and hidden directories aside) and fails on
//   - a package without a package doc comment, or one that does not open
//     with "Package NAME " ("Command NAME " or the like is accepted for a
//     main package, whose comment opens with any capitalised word);
//   - an exported type, function, method (of an exported type), constant or
//     variable without a doc comment (a constant or variable is documented
//     by its group's comment, its own, or a trailing line comment);
//   - an exported field of an exported struct type, or a method of an
//     exported interface type, without a doc comment (a field is
//     documented by its own comment, a trailing line comment, or the
//     comment above the run of fields on consecutive lines it belongs to;
//     an embedded field needs none: its type is documented);
//   - a library package (not main, not in exampleExempt) with no runnable
//     Example in its tests.
//
// knownGodocDebt lists what was missing when the check was added, in
// packages whose owners were changing them at the time; the test logs
// those and fails on anything else, and on a listed entry that is fixed
// (delete the line, so the list only shrinks).
func TestGodocEveryExportedName(t *testing.T) {
	var problems []string
	seen := map[string]bool{}
	for _, dir := range packageDirs(t, ".") {
		for _, p := range godocProblems(t, dir) {
			key := dir + ": " + p
			if knownGodocDebt[key] {
				seen[key] = true
				t.Logf("known, to fix: %s", key)
				continue
			}
			problems = append(problems, key)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	var stale []string
	for k := range knownGodocDebt {
		if !seen[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("knownGodocDebt entry %q no longer applies: delete it from godoc_test.go", k)
	}
}

// packageDirs returns the slash-separated directories under root that hold
// non-test Go files, skipping testdata, internal, vendor, hidden and
// underscore directories.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "internal" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if ok, _ := hasGoFiles(path); ok {
			dirs = append(dirs, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func hasGoFiles(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true, nil
		}
	}
	return false, nil
}

// godocProblems parses the package in dir (files the default build context
// would compile, and its tests for the Examples) and returns what it lacks.
func godocProblems(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	pkgName := ""
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(n, "_test.go") {
			pkgName = f.Name.Name
		}
		files = append(files, f)
	}
	if pkgName == "" {
		return nil // only files for other platforms
	}
	var pkgFiles []*ast.File
	for _, f := range files {
		if f.Name.Name == pkgName || f.Name.Name == pkgName+"_test" {
			pkgFiles = append(pkgFiles, f)
		}
	}
	p, err := doc.NewFromFiles(fset, pkgFiles, dir)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}

	var out []string
	switch text := strings.TrimSpace(p.Doc); {
	case text == "":
		out = append(out, "no package doc comment")
	case pkgName == "main":
		if first := strings.Fields(text)[0]; strings.ToUpper(first[:1]) != first[:1] {
			out = append(out, "package doc does not open with a capitalised word")
		}
	case !strings.HasPrefix(text, "Package "+pkgName+" "):
		out = append(out, fmt.Sprintf("package doc does not open with %q", "Package "+pkgName+" "))
	}

	undocumented := func(kind, name, docText string) {
		if strings.TrimSpace(docText) == "" {
			out = append(out, fmt.Sprintf("%s %s has no doc comment", kind, name))
		}
	}
	values := func(vs []*doc.Value, kind string) {
		for _, v := range vs {
			if strings.TrimSpace(v.Doc) != "" {
				continue
			}
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Doc != nil || vs.Comment != nil {
					continue
				}
				for _, n := range vs.Names {
					if n.IsExported() {
						out = append(out, fmt.Sprintf("%s %s has no doc comment", kind, n.Name))
					}
				}
			}
		}
	}
	values(p.Consts, "const")
	values(p.Vars, "var")
	for _, f := range p.Funcs {
		undocumented("func", f.Name, f.Doc)
	}
	examples := len(p.Examples)
	for _, f := range p.Funcs {
		examples += len(f.Examples)
	}
	for _, typ := range p.Types {
		undocumented("type", typ.Name, typ.Doc)
		out = append(out, memberProblems(fset, typ)...)
		values(typ.Consts, "const")
		values(typ.Vars, "var")
		for _, f := range typ.Funcs {
			undocumented("func", f.Name, f.Doc)
			examples += len(f.Examples)
		}
		for _, m := range typ.Methods {
			undocumented("method", typ.Name+"."+m.Name, m.Doc)
			examples += len(m.Examples)
		}
		examples += len(typ.Examples)
	}
	if pkgName != "main" && examples == 0 && !exampleExempt[dir] {
		out = append(out, "no runnable Example")
	}
	slices.Sort(out)
	return out
}

// memberProblems returns the exported struct fields and interface methods
// of typ that have no doc comment.
func memberProblems(fset *token.FileSet, typ *doc.Type) []string {
	var out []string
	for _, spec := range typ.Decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok {
			continue
		}
		var list *ast.FieldList
		kind := "field"
		switch t := ts.Type.(type) {
		case *ast.StructType:
			list = t.Fields
		case *ast.InterfaceType:
			list, kind = t.Methods, "interface method"
		}
		if list == nil {
			continue
		}
		// A group is a run of fields on consecutive lines; the comment
		// above its first field documents them all.
		grouped, prevEnd := false, -1
		for _, f := range list.List {
			line := fset.Position(f.Pos()).Line
			switch {
			case f.Doc != nil:
				grouped = true
			case line != prevEnd+1:
				grouped = false
			}
			prevEnd = fset.Position(f.End()).Line
			if len(f.Names) == 0 || grouped || f.Comment != nil {
				continue // embedded, or documented
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, fmt.Sprintf("%s %s.%s has no doc comment", kind, typ.Name, n.Name))
				}
			}
		}
	}
	return out
}

// exampleExempt: packages that need no Example, with the reason.
var exampleExempt = map[string]bool{
	"bench":          true, // the comparison-benchmark harness (a module never released): no API to show
	"bench/throttle": true, // likewise
}

// knownGodocDebt: what TestGodocEveryExportedName found missing in packages
// that other work was changing when the check was added (issue 35 item 8).
// Keys are "dir: problem" as the test prints them. Fix the doc and delete
// the line; the test fails on a line that no longer applies.
var knownGodocDebt = map[string]bool{}

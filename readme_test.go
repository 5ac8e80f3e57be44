package stormguard_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// snippetLines returns the non-blank lines of s with their indentation
// trimmed and runs of blanks inside them made one (gofmt aligns comments
// by the lines around them), which is how a README block and the compiled
// code it was taken from are compared.
func snippetLines(s string) []string {
	var out []string
	for _, ln := range strings.Split(s, "\n") {
		if f := strings.Fields(ln); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// readmeBlock is one ```go block of a Markdown file.
type readmeBlock struct {
	file  string
	line  int // of the opening fence
	src   string
	lines []string
}

func goBlocks(t *testing.T, path string) []readmeBlock {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	var body strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		ln := sc.Text()
		trimmed := strings.TrimSpace(ln)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```go"):
			cur = &readmeBlock{file: path, line: n}
			body.Reset()
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			cur.src = body.String()
			cur.lines = snippetLines(cur.src)
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(ln)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// containsRun reports whether want appears in have as consecutive lines.
func containsRun(have, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for i := 0; i+len(want) <= len(have); i++ {
		if have[i] != want[0] {
			continue
		}
		j := 1
		for j < len(want) && have[i+j] == want[j] {
			j++
		}
		if j == len(want) {
			return true
		}
	}
	return false
}

// TestREADMESnippetsAreCompiled keeps the docs from drifting. Every ```go
// block of every Markdown file in the repository is either
//   - a complete program (it starts with "package"): it must be
//     gofmt-formatted and build, laid over the module that holds the
//     Markdown file with go build -overlay, so nothing is written to the
//     tree; or
//   - a fragment: it must appear, line for line (indentation aside), in a
//     _test.go file of the repository — an Example or a test, which
//     `make test` compiles (and, with an Output comment, runs). To change
//     such a snippet, change the code it comes from and copy it back.
func TestREADMESnippetsAreCompiled(t *testing.T) {
	var sources [][]string
	var docs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, snippetLines(string(b)))
		case strings.HasSuffix(path, ".md"):
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	programs := map[string][]readmeBlock{} // by module directory
	checked := 0
	for _, doc := range docs {
		for _, b := range goBlocks(t, doc) {
			checked++
			if strings.HasPrefix(b.src, "package ") {
				if got, err := format.Source([]byte(b.src)); err != nil || string(got) != b.src {
					t.Errorf("%s:%d: a complete program must be gofmt-formatted (%v); gofmt gives:\n%s", b.file, b.line, err, got)
				}
				mod := moduleDir(t, filepath.Dir(doc))
				programs[mod] = append(programs[mod], b)
				continue
			}
			found := false
			for _, src := range sources {
				if containsRun(src, b.lines) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: this ```go block is not in any _test.go file; put it in an Example (or a test) and copy it from there, or make it a complete program", b.file, b.line)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no ```go blocks found: the walk is broken")
	}
	for mod, blocks := range programs {
		buildPrograms(t, mod, blocks)
	}
}

// moduleDir returns the directory of the module that holds dir.
func moduleDir(t *testing.T, dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == "." || d == string(filepath.Separator) {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// buildPrograms builds blocks, each a package of its own laid over the
// module directory mod with go build -overlay. Errors name Markdown lines.
func buildPrograms(t *testing.T, mod string, blocks []readmeBlock) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the snippets: %v", err)
	}
	abs, err := filepath.Abs(mod)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	replace := map[string]string{}
	var pkgs []string
	for i, b := range blocks {
		file := filepath.Join(tmp, fmt.Sprintf("s%d.go", i))
		if err := os.WriteFile(file, []byte(b.src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(abs, "readme_snippets", fmt.Sprintf("s%d", i), "main.go")] = file
		pkgs = append(pkgs, fmt.Sprintf("./readme_snippets/s%d", i))
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, append([]string{"build", "-overlay", ovFile, "-o", t.TempDir()}, pkgs...)...)
	cmd.Dir = abs
	if out, err := cmd.CombinedOutput(); err != nil {
		re := regexp.MustCompile(`readme_snippets/s(\d+)/main\.go:(\d+)`)
		msg := re.ReplaceAllStringFunc(string(out), func(m string) string {
			g := re.FindStringSubmatch(m)
			i, _ := strconv.Atoi(g[1])
			n, _ := strconv.Atoi(g[2])
			return fmt.Sprintf("%s:%d", blocks[i].file, blocks[i].line+n)
		})
		t.Errorf("Markdown programs in module %s do not build: %v\n%s", mod, err, msg)
	}
}

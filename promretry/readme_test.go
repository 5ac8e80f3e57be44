package promretry_test

import (
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeSnippetsBuild (issue #25 papercut 10): every ```go block of
// README.md is a complete program (package main, its imports, func main).
// Each must be gofmt-formatted and build, in the workspace (go.work), so a
// copied snippet works and the page cannot drift from the API.
func TestReadmeSnippetsBuild(t *testing.T) { buildSnippets(t, "README.md") }

// snippet is one ```go block and the README line its code starts on.
type snippet struct {
	line int
	src  string
}

// goBlocks returns the ```go blocks of a Markdown page.
func goBlocks(page string) []snippet {
	var out []snippet
	var cur *strings.Builder
	start := 0
	for i, line := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, start = &strings.Builder{}, i+2
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, snippet{start, cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// buildSnippets checks and builds readme's Go blocks, each as a package
// of its own laid over this module's directory with go build -overlay,
// so nothing is written to the source tree. Errors name README lines.
func buildSnippets(t *testing.T, readme string) {
	t.Helper()
	page, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(page))
	if len(blocks) == 0 {
		t.Fatalf("%s has no ```go block", readme)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the snippets: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	replace := map[string]string{}
	var pkgs []string
	for i, b := range blocks {
		if !strings.HasPrefix(b.src, "package main\n") {
			t.Errorf("%s:%d: a Go block must be a complete program (package main ... func main)", readme, b.line)
			continue
		}
		if got, err := format.Source([]byte(b.src)); err != nil || string(got) != b.src {
			t.Errorf("%s:%d: not gofmt-formatted (%v); gofmt gives:\n%s", readme, b.line, err, got)
		}
		file := filepath.Join(tmp, fmt.Sprintf("s%d.go", i))
		if err := os.WriteFile(file, []byte(b.src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(wd, "readme_snippets", fmt.Sprintf("s%d", i), "main.go")] = file
		pkgs = append(pkgs, fmt.Sprintf("./readme_snippets/s%d", i))
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, append([]string{"build", "-overlay", ovFile, "-o", t.TempDir()}, pkgs...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// Name README lines instead of the overlay's files.
		re := regexp.MustCompile(`readme_snippets/s(\d+)/main\.go:(\d+)`)
		msg := re.ReplaceAllStringFunc(string(out), func(m string) string {
			g := re.FindStringSubmatch(m)
			i, _ := strconv.Atoi(g[1])
			n, _ := strconv.Atoi(g[2])
			return fmt.Sprintf("%s:%d", readme, blocks[i].line+n-1)
		})
		t.Fatalf("README snippets do not build: %v\n%s", err, msg)
	}
}

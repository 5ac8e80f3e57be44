package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every row of the README's reproductions table names the test that
// checks it, and that test exists in the sim package.
func TestReproductionsTableNamesItsTests(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "## Reproductions")
	if i < 0 {
		t.Fatal("README has no reproductions table")
	}
	s = s[i:]
	s = s[:strings.Index(s[3:], "\n## ")+3]
	files, err := filepath.Glob("../../sim/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("sim tests: %v", err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	rows := 0
	name := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| source") || strings.HasPrefix(line, "| ---") {
			continue
		}
		rows++
		cells := strings.Split(line, " | ")
		tests := name.FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(cells) != 5 || len(tests) == 0 {
			t.Errorf("row %d has %d cells and %d tests: %.80s", rows, len(cells), len(tests), line)
			continue
		}
		for _, m := range tests {
			if !strings.Contains(src.String(), "func "+m[1]+"(t *testing.T)") {
				t.Errorf("row %d names %s, which sim does not define", rows, m[1])
			}
		}
	}
	if rows < 8 {
		t.Errorf("%d rows, want at least 8", rows)
	}
}

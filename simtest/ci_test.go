package simtest_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// reProblemLine is the form editors and CI problem matchers parse.
var reProblemLine = regexp.MustCompile(`^([^:]+):(\d+):(\d+): (.+)$`)

// Issue 34 item 8: every problem line is file:line:col: message with no
// tool prefix ("check: ", "config: ") on any line, and the YAML parser's
// own words are rewritten in the project's, at the line where the file
// stops being YAML (the parser named the enclosing mapping's line, or
// none).
func TestProblemLinesAreFileLineColInTheProjectsWords(t *testing.T) {
	for _, c := range []struct {
		name, content string
		line, col     int
		want          string
	}{
		{"tab.yaml", "policies:\n  ok:\n\tmax_attempts: 1\n", 3, 1, "tabs are not allowed for indentation"},
		{"tab2.yaml", "policies:\n  ok:\n    max_attempts: 1\n  \tbad: 2\n", 4, 3, "tabs are not allowed for indentation"},
		{"alias.yaml", "policies:\n  ok: &b\n    max_attempts: 1\n  two: *b\n", 4, 8, "YAML aliases are not supported (*b)"},
		{"noanchor.yaml", "policies:\n  ok: *nope\n", 2, 7, "YAML aliases are not supported (*nope"},
		{"merge.yaml", "policies:\n  ok:\n    <<: {max_attempts: 1}\n", 3, 5, "YAML merge keys (<<) are not supported"},
		{"indent.yaml", "policies:\n  ok:\n    max_attempts: 1\n   bad: 2\n", 4, 4, "does not line up with the keys above it"},
		{"colon.yaml", "policies: a: b\n", 1, 1, "a colon and a space inside a value: quote the value"},
		{"flow.yaml", "policies:\n  ok: {max_attempts: 1\n", 2, 3, "an unclosed {"},
		{"quote.yaml", "policies:\n  ok:\n    max_attempts: \"1\n", 3, 5, "a quote is not closed"},
		{"unknown.yaml", "policies:\n  ok:\n    max_atempts: 1\n", 3, 5, "policies.ok.max_atempts: unknown field"},
		{"two.yaml", "policies:\n  ok: {}\n---\npolicies:\n  hammer: {max_attempts: 10}\n", 4, 1, "a second YAML document"},
		{"empty.yaml", "", 1, 1, "the file is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := run(t, "--storms", "errors-10", writeFile(t, c.name, c.content))
			if code != simtest.ExitUsage {
				t.Fatalf("exit %d, want 2\n%s", code, errs)
			}
			first := strings.SplitN(errs, "\n", 2)[0]
			m := reProblemLine.FindStringSubmatch(first)
			if m == nil || filepath.Base(m[1]) != c.name {
				t.Fatalf("first line %q is not %s:line:col: message", first, c.name)
			}
			if m[2] != strconv.Itoa(c.line) || m[3] != strconv.Itoa(c.col) || !strings.Contains(m[4], c.want) {
				t.Errorf("line %q: want %d:%d and %q", first, c.line, c.col, c.want)
			}
			for _, raw := range []string{"found character", "did not find expected", "mapping values are not allowed", "found unexpected end", "unknown anchor", "not an alias"} {
				mustNotContain(t, "stderr", errs, raw)
			}
			noToolPrefix(t, errs)
		})
	}
	// A downstream file's problems and an unreadable file likewise.
	ds := writeFile(t, "ds.yaml", "downstream:\n  wrkers: 3\n\tbad\n")
	code, _, errs := run(t, "--downstream", ds, "testdata/budgeted.yaml")
	if code != simtest.ExitUsage || !reProblemLine.MatchString(strings.SplitN(errs, "\n", 2)[0]) || !strings.Contains(errs, "ds.yaml:3:1: tabs are not allowed") {
		t.Errorf("downstream file: exit %d\n%s", code, errs)
	}
	noToolPrefix(t, errs)
	code, _, errs = run(t, "testdata/nosuch.yaml")
	if code != simtest.ExitUsage || !strings.HasPrefix(errs, "testdata/nosuch.yaml:1:1: cannot be read: no such file") {
		t.Errorf("missing file: exit %d\n%s", code, errs)
	}
	noToolPrefix(t, errs)
}

func noToolPrefix(t *testing.T, errs string) {
	t.Helper()
	for _, l := range strings.Split(errs, "\n") {
		for _, pre := range []string{"check:", "config:", "simtest:", "stormsim"} {
			if strings.HasPrefix(l, pre) || strings.Contains(l, ": "+pre+" ") {
				t.Errorf("line %q carries a tool prefix", l)
			}
		}
	}
}

// FAIL lines are problem lines too: at the failing policy's name in the
// file, with no prefix.
func TestFailLinesPointAtThePolicy(t *testing.T) {
	fullModel(t)
	code, _, errs := run(t, "--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	mustContain(t, "stderr", errs, "testdata/nobudget.yaml:3:3: FAIL nobudget failed errors-50: peak amplification")
	noToolPrefix(t, errs)
}

// Issue 34 item 9: --json on exit 2 prints a JSON document of the
// problems on stdout (it printed nothing).
func TestJSONOnExit2PrintsTheProblems(t *testing.T) {
	bad := writeFile(t, "bad.yaml", "policies:\n  ok:\n    max_atempts: 1\n    backoff: {base: 20x}\n")
	code, out, errs := run(t, "--json", bad)
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, errs)
	}
	var doc struct {
		ModelVersion string `json:"model_version"`
		ToolVersion  string `json:"tool_version"`
		Files        []struct {
			File     string `json:"file"`
			Verdict  string `json:"verdict"`
			Problems []struct {
				File     string `json:"file"`
				Line     int    `json:"line"`
				Column   int    `json:"column"`
				Path     string `json:"path"`
				Message  string `json:"message"`
				Severity string `json:"severity"`
			} `json:"problems"`
		} `json:"files"`
		Summary struct{ Files, Errors int } `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if doc.ModelVersion == "" || doc.ToolVersion == "" || len(doc.Files) != 1 || doc.Summary.Errors != 1 {
		t.Fatalf("document %+v", doc)
	}
	f := doc.Files[0]
	if f.Verdict != "error" || len(f.Problems) != 2 {
		t.Fatalf("file %+v", f)
	}
	p := f.Problems[0]
	if p.File != bad || p.Line != 3 || p.Column != 5 || p.Path != "policies.ok.max_atempts" || !strings.HasPrefix(p.Message, "unknown field") || p.Severity != "error" {
		t.Errorf("problem %+v", p)
	}
	if q := f.Problems[1]; q.Line != 4 || q.Path != "policies.ok.backoff.base" {
		t.Errorf("problem %+v", q)
	}
}

// junitXML is the JUnit XML structure CI systems read (Ant's junit.xsd):
// every element and attribute the test requires.
type junitXML struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    *int     `xml:"tests,attr"`
	Failures *int     `xml:"failures,attr"`
	Errors   *int     `xml:"errors,attr"`
	Suites   []struct {
		Name     *string `xml:"name,attr"`
		Tests    *int    `xml:"tests,attr"`
		Failures *int    `xml:"failures,attr"`
		Errors   *int    `xml:"errors,attr"`
		Cases    []struct {
			Name      *string `xml:"name,attr"`
			Classname *string `xml:"classname,attr"`
			Failures  []struct {
				Message *string `xml:"message,attr"`
				Type    *string `xml:"type,attr"`
				Text    string  `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message *string `xml:"message,attr"`
				Text    string  `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// Issue 34 item 9: --format junit writes JUnit XML: a testsuite per file,
// a testcase per policy and storm, a failure per failed gate, an error
// for a file that could not be checked; the counts add up.
func TestFormatJUnitIsJUnitXML(t *testing.T) {
	fullModel(t)
	bad := writeFile(t, "bad.yaml", "policies:\n  ok:\n\tmax_attempts: 1\n")
	code, out, errs := run(t, "--format", "junit", "--storms", "errors-50,errors-10", "--max-amplification", "1.5", "testdata/nobudget.yaml", "testdata/budgeted.yaml", bad)
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, errs)
	}
	if !strings.HasPrefix(out, "<?xml") {
		t.Fatalf("no XML declaration:\n%s", out)
	}
	var doc junitXML
	dec := xml.NewDecoder(strings.NewReader(out))
	dec.Strict = true
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out)
	}
	if doc.Tests == nil || doc.Failures == nil || doc.Errors == nil || len(doc.Suites) != 3 {
		t.Fatalf("testsuites: %s", out)
	}
	tests, failures, errors := 0, 0, 0
	for i, s := range doc.Suites {
		if s.Name == nil || s.Tests == nil || s.Failures == nil || s.Errors == nil || *s.Tests != len(s.Cases) {
			t.Fatalf("testsuite %d lacks name/tests/failures/errors or miscounts: %s", i, out)
		}
		f, e := 0, 0
		for _, c := range s.Cases {
			if c.Name == nil || c.Classname == nil || *c.Classname != *s.Name {
				t.Fatalf("testcase without name or classname: %s", out)
			}
			if len(c.Failures) > 0 {
				f++
			}
			for _, x := range c.Failures {
				if x.Message == nil || x.Type == nil || *x.Message == "" {
					t.Fatalf("failure without message or type: %s", out)
				}
			}
			if c.Error != nil {
				e++
				if c.Error.Message == nil || !strings.Contains(c.Error.Text, "tabs are not allowed") {
					t.Fatalf("error: %s", out)
				}
			}
		}
		if f != *s.Failures || e != *s.Errors {
			t.Errorf("testsuite %s: counts %d/%d, cases say %d/%d", *s.Name, *s.Failures, *s.Errors, f, e)
		}
		tests, failures, errors = tests+*s.Tests, failures+*s.Failures, errors+*s.Errors
	}
	if tests != *doc.Tests || failures != *doc.Failures || errors != *doc.Errors {
		t.Errorf("testsuites counts %d/%d/%d, suites add to %d/%d/%d", *doc.Tests, *doc.Failures, *doc.Errors, tests, failures, errors)
	}
	s := doc.Suites[0]
	if *s.Name != "testdata/nobudget.yaml" || *s.Tests != 2 || *s.Failures != 1 || *s.Cases[0].Name != "nobudget / errors-50" || *s.Cases[0].Failures[0].Type != "max-amplification" {
		t.Errorf("nobudget suite: %s", out)
	}
	if s := doc.Suites[1]; *s.Failures != 0 || *s.Tests != 2 {
		t.Errorf("budgeted suite: %s", out)
	}
	if s := doc.Suites[2]; *s.Errors != 1 || *s.Tests != 1 {
		t.Errorf("bad suite: %s", out)
	}
}

// checkSARIF checks doc against the SARIF 2.1.0 schema's required
// properties for what the command writes: version "2.1.0", $schema,
// runs[].tool.driver.name, and each result's ruleId (one of the driver's
// rules), message.text and locations with an artifact uri and a region
// from line 1 and column 1.
func checkSARIF(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("SARIF: "+format+"\n%s", append(a, data)...)
	}
	if doc["version"] != "2.1.0" {
		fail("version %v, want 2.1.0", doc["version"])
	}
	if s, _ := doc["$schema"].(string); !strings.Contains(s, "sarif") || !strings.Contains(s, "2.1.0") {
		fail("$schema %v", doc["$schema"])
	}
	runs, _ := doc["runs"].([]any)
	if len(runs) == 0 {
		fail("no runs")
	}
	var results []map[string]any
	for _, r := range runs {
		run, _ := r.(map[string]any)
		tool, _ := run["tool"].(map[string]any)
		driver, _ := tool["driver"].(map[string]any)
		if name, _ := driver["name"].(string); name == "" {
			fail("runs[].tool.driver.name missing")
		}
		rules := map[string]bool{}
		rs, _ := driver["rules"].([]any)
		for _, x := range rs {
			rule, _ := x.(map[string]any)
			id, _ := rule["id"].(string)
			if id == "" {
				fail("a rule without an id")
			}
			rules[id] = true
		}
		res, ok := run["results"].([]any)
		if !ok {
			fail("runs[].results missing")
		}
		for _, x := range res {
			result, _ := x.(map[string]any)
			id, _ := result["ruleId"].(string)
			if !rules[id] {
				fail("ruleId %q is not a driver rule", id)
			}
			switch result["level"] {
			case "error", "warning", "note", "none", nil:
			default:
				fail("level %v", result["level"])
			}
			msg, _ := result["message"].(map[string]any)
			if text, _ := msg["text"].(string); text == "" {
				fail("a result without message.text")
			}
			locs, _ := result["locations"].([]any)
			if len(locs) == 0 {
				fail("a result without locations")
			}
			for _, l := range locs {
				loc, _ := l.(map[string]any)
				phys, _ := loc["physicalLocation"].(map[string]any)
				art, _ := phys["artifactLocation"].(map[string]any)
				if uri, _ := art["uri"].(string); uri == "" || strings.Contains(uri, `\`) {
					fail("artifactLocation.uri %v", art["uri"])
				}
				region, _ := phys["region"].(map[string]any)
				if line, _ := region["startLine"].(float64); line < 1 {
					fail("region.startLine %v", region["startLine"])
				}
				if col, ok := region["startColumn"].(float64); ok && col < 1 {
					fail("region.startColumn %v", col)
				}
			}
			results = append(results, result)
		}
	}
	return results
}

// Issue 34 item 9: --format sarif writes SARIF 2.1.0, a result per
// problem and per failed gate, located at the line.
func TestFormatSARIFIsSARIF210(t *testing.T) {
	fullModel(t)
	bad := writeFile(t, "bad.yaml", "policies:\n  ok:\n    max_atempts: 1\n")
	_, out, errs := run(t, "--format", "sarif", "--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml", bad)
	results := checkSARIF(t, []byte(out))
	if len(results) != 2 {
		t.Fatalf("%d results, want 2 (a gate, a problem)\n%s\n%s", len(results), out, errs)
	}
	ids := results[0]["ruleId"].(string) + " " + results[1]["ruleId"].(string)
	if ids != "gate/max-amplification problem" {
		t.Errorf("rules %q", ids)
	}
	loc := results[1]["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)
	if r := loc["region"].(map[string]any); r["startLine"] != 3.0 || r["startColumn"] != 5.0 {
		t.Errorf("region %v", r)
	}
	// A run with nothing wrong is valid SARIF too, with no results.
	code, out, _ := run(t, "--format", "sarif", "--storms", "errors-10", "testdata/budgeted.yaml")
	if code != simtest.ExitPass || len(checkSARIF(t, []byte(out))) != 0 {
		t.Errorf("pass: exit %d\n%s", code, out)
	}
}

// Issue 34 item 9: --format github writes a workflow command per problem
// and failure, its properties and message escaped as GitHub's toolkit
// escapes them.
func TestFormatGitHubAnnotations(t *testing.T) {
	fullModel(t)
	bad := writeFile(t, "bad.yaml", "policies:\n  ok:\n    max_atempts: 1\n")
	code, out, _ := run(t, "--format", "github", "--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml", bad)
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d", code)
	}
	re := regexp.MustCompile(`^::(error|warning) file=([^,]+),line=(\d+),col=(\d+),title=([^,:]+)::(.+)$`)
	var cmds [][]string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "::") {
			m := re.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("workflow command %q is malformed", l)
			}
			cmds = append(cmds, m)
		}
	}
	if len(cmds) != 2 {
		t.Fatalf("%d workflow commands, want 2:\n%s", len(cmds), out)
	}
	if m := cmds[0]; m[2] != "testdata/nobudget.yaml" || m[3] != "3" || m[4] != "3" || !strings.Contains(m[5], "nobudget failed errors-50") || !strings.HasPrefix(m[6], "nobudget failed errors-50: peak amplification") {
		t.Errorf("failure annotation %q", m[0])
	}
	if m := cmds[1]; m[2] != filepath.ToSlash(bad) || m[3] != "3" || m[4] != "5" || !strings.HasPrefix(m[6], "policies.ok.max_atempts: unknown field") {
		t.Errorf("problem annotation %q", m[0])
	}
	mustContain(t, "stdout", out, "FAIL nobudget") // the text report too
	if strings.Contains(out, "\n::") && strings.Contains(strings.Join(cmds[0], ""), "\n") {
		t.Error("a newline inside a command")
	}
}

// Issue 34 item 10: several files and globs in one run, each judged on
// its own, with a summary line; the exit code is the worst verdict.
func TestSeveralFilesAndGlobs(t *testing.T) {
	fullModel(t)
	dir := t.TempDir()
	for name, src := range map[string]string{"a-budgeted.yaml": "testdata/budgeted.yaml", "b-nobudget.yaml": "testdata/nobudget.yaml"} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--storms", "errors-50", "--max-amplification", "1.5"}
	code, out, errs := run(t, append(args, filepath.Join(dir, "*.yaml"))...)
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	mustContain(t, "stdout", out, "a-budgeted.yaml (version", "b-nobudget.yaml (version", "PASS budgeted", "FAIL nobudget")
	mustContain(t, "stderr", errs, "a-budgeted.yaml: PASS: 1 policies × 1 storms", "b-nobudget.yaml: FAIL: 1 gate(s) failed",
		"2 files: 1 passed, 1 failed a gate, 0 could not be checked")
	if i, j := strings.Index(out, "a-budgeted"), strings.Index(out, "b-nobudget"); i > j {
		t.Error("files out of the glob's order")
	}
	// A broken file does not stop the others; it makes the run exit 2.
	bad := writeFile(t, "bad.yaml", "policies: {}\n")
	code, out, errs = run(t, append(args, "--json", filepath.Join(dir, "*.yaml"), bad)...)
	if code != simtest.ExitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, errs)
	}
	var doc struct {
		Files []struct {
			File    string          `json:"file"`
			Verdict string          `json:"verdict"`
			Report  json.RawMessage `json:"report"`
		} `json:"files"`
		Summary struct {
			Files, Passed, Failed, Errors int
			GateFailures                  int `json:"gate_failures"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) != 3 || doc.Files[0].Verdict != "pass" || doc.Files[1].Verdict != "fail" || doc.Files[2].Verdict != "error" || doc.Files[2].Report != nil {
		t.Errorf("files %+v", doc.Files)
	}
	if s := doc.Summary; s.Files != 3 || s.Passed != 1 || s.Failed != 1 || s.Errors != 1 || s.GateFailures != 1 {
		t.Errorf("summary %+v", s)
	}
	mustContain(t, "stderr", errs, "3 files: 1 passed, 1 failed a gate, 1 could not be checked")
	// A glob that matches nothing is reported as such.
	code, _, errs = run(t, filepath.Join(dir, "*.nothing"))
	if code != simtest.ExitUsage || !strings.Contains(errs, "cannot be read") {
		t.Errorf("empty glob: exit %d\n%s", code, errs)
	}
}

// Issue 34 item 11: the JSON carries model_version and tool_version;
// gates are numbers; a recovery that did not happen is null, not 0 or -1.
func TestJSONVersionsNumbersAndNullRecovery(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--json", "--storms", "brownout", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if v, _ := doc["model_version"].(string); v != simtest.ModelVersion {
		t.Errorf("model_version %v", doc["model_version"])
	}
	if v, _ := doc["tool_version"].(string); v == "" {
		t.Errorf("tool_version %v", doc["tool_version"])
	}
	gates := doc["gates"].(map[string]any)
	if a, ok := gates["max_amplification"].(float64); !ok || a != simtest.DefaultMaxAmplification {
		t.Errorf("gates.max_amplification %#v, want the number %d", gates["max_amplification"], simtest.DefaultMaxAmplification)
	}
	if r, ok := gates["max_recovery_s"].(float64); !ok || r != 10 {
		t.Errorf("gates.max_recovery_s %#v, want the number 10", gates["max_recovery_s"])
	}
	if v, ok := gates["min_success"]; !ok || v != nil {
		t.Errorf("gates.min_success %#v, want null (not gated)", v)
	}
	storm := doc["policies"].([]any)[0].(map[string]any)["storms"].([]any)[0].(map[string]any)
	if v, ok := storm["recovery_s"]; !ok || v != nil {
		t.Errorf("storm recovery_s %#v, want null", v)
	}
	for _, tr := range storm["trials"].([]any) {
		if v, ok := tr.(map[string]any)["recovery_s"]; !ok || v != nil {
			t.Errorf("trial recovery_s %#v, want null", v)
		}
	}
	var rec map[string]any
	for _, x := range doc["failures"].([]any) {
		if f := x.(map[string]any); f["gate"] == "max-recovery" {
			rec = f
		}
	}
	if rec == nil || rec["value"] != nil || rec["low"] != nil || rec["high"] != nil || rec["limit"] != 10.0 {
		t.Errorf("max-recovery failure %v, want value, low, high null, limit 10", rec)
	}
	if regexp.MustCompile(`:\s*-1[,\n]`).MatchString(out) {
		t.Errorf("a -1 stands for a missing value:\n%s", out)
	}
}

// Issue 34 item 12: an --out that cannot be written kept neither the FAIL
// lines nor the exit code of the gate failure (it returned 2 first).
func TestOutUnwritableKeepsFailLinesAndExit1(t *testing.T) {
	fullModel(t)
	file := writeFile(t, "x", "")
	code, _, errs := run(t, "--storms", "errors-50", "--max-amplification", "1.5", "--out", file+"/sub", "testdata/nobudget.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d, want 1 (the gate failure)\n%s", code, errs)
	}
	mustContain(t, "stderr", errs, "testdata/nobudget.yaml:3:3: FAIL nobudget failed errors-50", "testdata/nobudget.yaml: --out: ", "FAIL: 1 gate(s) failed")
}

// The stdout of every format is only the format: a text run's stdout has
// no problem lines, and --json with --format text is refused.
func TestFormatFlagRefusesJSONWithAnother(t *testing.T) {
	var out, errb bytes.Buffer
	if code := simtest.Main([]string{"--json", "--format", "sarif", "testdata/budgeted.yaml"}, &out, &errb); code != simtest.ExitUsage || !strings.Contains(errb.String(), "choose one") {
		t.Errorf("exit %d\n%s", code, &errb)
	}
	if code := simtest.Main([]string{"--format", "xml", "testdata/budgeted.yaml"}, &out, &errb); code != simtest.ExitUsage || !strings.Contains(errb.String(), "want one of text, json, junit, sarif, github") {
		t.Errorf("exit %d\n%s", code, &errb)
	}
}

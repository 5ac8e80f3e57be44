package simtest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Formats are the report formats of stormsim check's --format.
var Formats = []string{"text", "json", "junit", "sarif", "github"}

// Verdicts of a file.
const (
	VerdictPass  = "pass"  // every policy kept every gate
	VerdictFail  = "fail"  // a gate failed
	VerdictError = "error" // the file could not be checked: see its problems
)

// Severities of a problem.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Results are one run of stormsim check over one or more files, as the
// JSON of a run with problems or several files holds them.
type Results struct {
	// ModelVersion is the check's model (the ModelVersion constant):
	// results of the same ModelVersion are comparable.
	ModelVersion string `json:"model_version"`
	// ToolVersion is the version of the stormsim binary (its module
	// version, or "devel").
	ToolVersion string `json:"tool_version"`
	// Files are the verdicts, one per file, in the order the command
	// line names the files (globs expanded, repeats dropped); only the
	// --downstream file's when that file could not be loaded.
	Files []FileResult `json:"files"`
	// Summary counts Files by verdict.
	Summary Summary `json:"summary"`
}

// Summary counts the files of a run by verdict.
type Summary struct {
	// Files is how many files the run judged (len(Results.Files)).
	Files int `json:"files"`
	// Passed is the files whose verdict is VerdictPass.
	Passed int `json:"passed"`
	// Failed is the files whose verdict is VerdictFail.
	Failed int `json:"failed"`
	// Errors is the files that could not be checked.
	Errors int `json:"errors"`
	// GateFailures is the failed gates over every file.
	GateFailures int `json:"gate_failures"`
}

// FileResult is the verdict on one file: its problems (the reasons it
// could not be checked, and warnings), and the report when it was checked.
type FileResult struct {
	// File is the file's name as the command line gives it (or as a
	// glob matched it).
	File string `json:"file"`
	// Verdict is VerdictPass, VerdictFail or VerdictError.
	Verdict string `json:"verdict"`
	// Problems are the file's problems: the errors that stopped the
	// check, if any (the Verdict is then VerdictError), and warnings; nil
	// (null) when there are none.
	Problems []ProblemReport `json:"problems"`
	// Report is the check's report; nil (left out) when the file could
	// not be checked (VerdictError).
	Report *Report `json:"report,omitempty"`

	positions map[string][2]int // by policy label: where its name is in the file
}

// ProblemReport is a Problem as the reports write it.
type ProblemReport struct {
	// File is the name of the file the problem is in.
	File string `json:"file"`
	// Line and Column are where in File the problem is, counted from 1;
	// 1 when not known.
	Line   int `json:"line"`
	Column int `json:"column"`
	// Path is the setting the problem is about, as a dotted path
	// ("downstream.queue"); "" (left out) when it is about the file as a
	// whole.
	Path string `json:"path,omitempty"`
	// Message says what is wrong, without the location or Path (and,
	// for a warning, without "warning: ").
	Message string `json:"message"`
	// Severity is SeverityError (the file could not be checked) or
	// SeverityWarning (checked, but something needs attention).
	Severity string `json:"severity"`
}

func reportProblems(ps []Problem, severity string) []ProblemReport {
	out := make([]ProblemReport, 0, len(ps))
	for _, p := range ps {
		out = append(out, ProblemReport{File: p.File, Line: max(p.Line, 1), Column: max(p.Column, 1), Path: p.Path, Message: p.Msg, Severity: severity})
	}
	return out
}

// String is the problem's line: "file:line:col: path: message", a
// warning's message starting "warning: ".
func (p ProblemReport) String() string {
	msg := p.Message
	if p.Severity == SeverityWarning {
		msg = "warning: " + msg
	}
	return FormatProblem(Problem{File: p.File, Line: p.Line, Column: p.Column, Path: p.Path, Msg: msg})
}

// at returns where the failure's policy is in the file (1, 1 when not
// known).
func (f *FileResult) at(policy string) (int, int) {
	p := f.positions[policy]
	return max(p[0], 1), max(p[1], 1)
}

// failLine is a gate failure's line: "file:line:col: FAIL message", at
// the policy's name.
func (f *FileResult) failLine(x Failure) string {
	line, col := f.at(x.Policy)
	return fmt.Sprintf("%s:%d:%d: FAIL %s", f.File, line, col, x.Message)
}

func (r *Results) summarize() {
	r.Summary = Summary{Files: len(r.Files)}
	for _, f := range r.Files {
		switch f.Verdict {
		case VerdictPass:
			r.Summary.Passed++
		case VerdictFail:
			r.Summary.Failed++
		default:
			r.Summary.Errors++
		}
		if f.Report != nil {
			r.Summary.GateFailures += len(f.Report.Failures)
		}
	}
}

// writeLines writes the problem, FAIL and verdict lines of every file,
// then, for several files, the summary line.
func (r *Results) writeLines(w io.Writer) {
	for i := range r.Files {
		f := &r.Files[i]
		for _, p := range f.Problems {
			fmt.Fprintln(w, p.String())
		}
		rep := f.Report
		if rep == nil {
			fmt.Fprintf(w, "%s: not checked: %d problem(s)\n", f.File, len(f.Problems)-f.warnings())
			continue
		}
		for _, x := range rep.Failures {
			fmt.Fprintln(w, f.failLine(x))
		}
		if rep.Pass {
			fmt.Fprintf(w, "%s: PASS: %d policies × %d storms: every gate kept\n", f.File, len(rep.Policies), len(rep.Storms))
			continue
		}
		failed := 0
		for _, p := range rep.Policies {
			if !p.Pass {
				failed++
			}
		}
		fmt.Fprintf(w, "%s: FAIL: %d gate(s) failed, in %d of %d policies\n", f.File, len(rep.Failures), failed, len(rep.Policies))
	}
	if s := r.Summary; s.Files > 1 {
		fmt.Fprintf(w, "%d files: %d passed, %d failed a gate, %d could not be checked\n", s.Files, s.Passed, s.Failed, s.Errors)
	}
}

func (f *FileResult) warnings() int {
	n := 0
	for _, p := range f.Problems {
		if p.Severity == SeverityWarning {
			n++
		}
	}
	return n
}

// write writes the report in format to w.
func (r *Results) write(w io.Writer, format string) error {
	switch format {
	case "json":
		return r.writeJSON(w)
	case "junit":
		return r.writeJUnit(w)
	case "sarif":
		return r.writeSARIF(w)
	}
	for i, f := range r.Files {
		if f.Report == nil {
			continue
		}
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := f.Report.WriteText(w); err != nil {
			return err
		}
	}
	if format == "github" {
		return r.writeGitHub(w)
	}
	return nil
}

// writeJSON writes one file's report as it is (Report), or, for a file
// that could not be checked or several files, the Results.
func (r *Results) writeJSON(w io.Writer) error {
	if len(r.Files) == 1 && r.Files[0].Report != nil {
		return r.Files[0].Report.WriteJSON(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// JUnit XML: the structure of the JUnit schema (Ant's junit.xsd, as CI
// systems read it): a testsuite per file, a testcase per policy and
// storm, a failure per failed gate; a file that could not be checked has
// one testcase "load" with an error.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failures  []junitResult `xml:"failure,omitempty"`
	Error     *junitResult  `xml:"error,omitempty"`
}

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func (r *Results) writeJUnit(w io.Writer) error {
	out := junitSuites{Name: "stormsim check"}
	for i := range r.Files {
		f := &r.Files[i]
		s := junitSuite{Name: f.File, Time: "0", Properties: []junitProperty{
			{"model_version", r.ModelVersion}, {"tool_version", r.ToolVersion}}}
		if f.Report == nil {
			var lines []string
			for _, p := range f.Problems {
				lines = append(lines, p.String())
			}
			msg := ""
			if len(f.Problems) > 0 {
				msg = f.Problems[len(f.Problems)-1].String()
			}
			s.Cases = append(s.Cases, junitCase{Name: "load", Classname: f.File, Time: "0",
				Error: &junitResult{Message: msg, Type: "problem", Text: strings.Join(lines, "\n")}})
			s.Tests, s.Errors = 1, 1
		} else {
			for _, p := range f.Report.Policies {
				for _, st := range p.Storms {
					c := junitCase{Name: p.Policy + " / " + st.Storm, Classname: f.File, Time: "0"}
					for _, x := range st.Failures {
						c.Failures = append(c.Failures, junitResult{Message: x.Message, Type: x.Gate, Text: f.failLine(x)})
					}
					if len(c.Failures) > 0 {
						s.Failures++
					}
					s.Tests++
					s.Cases = append(s.Cases, c)
				}
			}
		}
		out.Tests, out.Failures, out.Errors = out.Tests+s.Tests, out.Failures+s.Failures, out.Errors+s.Errors
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// SARIF 2.1.0 (the OASIS standard's sarif-schema-2.1.0.json), the parts
// code-scanning services read.
type sarifLog struct {
	Version string     `json:"version"`
	Schema  string     `json:"$schema"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
}

// sarifRules are the rules a result may name.
var sarifRules = []sarifRule{
	{"problem", sarifMessage{"the file cannot be checked as it is"}},
	{"warning", sarifMessage{"the file is checked, but something in it needs attention"}},
	{"gate/" + GateAmplification, sarifMessage{"the load a storm causes exceeds the amplification gate"}},
	{"gate/" + GateRecovery, sarifMessage{"the downstream does not recover within the recovery gate after a storm"}},
	{"gate/" + GateSuccess, sarifMessage{"too few calls succeed during or after a storm"}},
	{"gate/" + GateRunaway, sarifMessage{"retries run away in a storm"}},
}

func (r *Results) writeSARIF(w io.Writer) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "stormsim check", Version: r.ToolVersion,
		InformationURI: "https://github.com/stormguard/stormguard/tree/main/simtest", Rules: sarifRules}}, Results: []sarifResult{}}
	loc := func(file string, line, col int) []sarifLocation {
		return []sarifLocation{{sarifPhysical{sarifArtifact{filepath.ToSlash(file)}, sarifRegion{max(line, 1), max(col, 1)}}}}
	}
	for i := range r.Files {
		f := &r.Files[i]
		for _, p := range f.Problems {
			rule, level := "problem", "error"
			if p.Severity == SeverityWarning {
				rule, level = "warning", "warning"
			}
			msg := p.Message
			if p.Path != "" {
				msg = p.Path + ": " + msg
			}
			run.Results = append(run.Results, sarifResult{RuleID: rule, Level: level, Message: sarifMessage{msg}, Locations: loc(p.File, p.Line, p.Column)})
		}
		if f.Report == nil {
			continue
		}
		for _, x := range f.Report.Failures {
			line, col := f.at(x.Policy)
			run.Results = append(run.Results, sarifResult{RuleID: "gate/" + x.Gate, Level: "error", Message: sarifMessage{x.Message}, Locations: loc(f.File, line, col)})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Version: "2.1.0", Schema: "https://json.schemastore.org/sarif-2.1.0.json", Runs: []sarifRun{run}})
}

// writeGitHub writes a GitHub Actions workflow command per problem and
// failure: "::error file=…,line=…,col=…,title=…::message".
func (r *Results) writeGitHub(w io.Writer) error {
	var b strings.Builder
	cmd := func(kind, file string, line, col int, title, msg string) {
		fmt.Fprintf(&b, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", kind, ghProperty(filepath.ToSlash(file)), max(line, 1), max(col, 1), ghProperty(title), ghData(msg))
	}
	for i := range r.Files {
		f := &r.Files[i]
		for _, p := range f.Problems {
			msg := p.Message
			if p.Path != "" {
				msg = p.Path + ": " + msg
			}
			cmd(p.Severity, p.File, p.Line, p.Column, "stormsim check", msg)
		}
		if f.Report == nil {
			continue
		}
		for _, x := range f.Report.Failures {
			line, col := f.at(x.Policy)
			cmd("error", f.File, line, col, "stormsim check: "+x.Policy+" failed "+x.Storm, x.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ghData escapes a workflow command's message; ghProperty a property
// value (GitHub's toolkit: escapeData, escapeProperty).
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// writeOuts writes each checked file's report to dir (one file) or to a
// folder of dir per file (several files), reporting failures on stderr.
// It returns whether every write succeeded.
func writeOuts(dir string, r *Results, stderr io.Writer) bool {
	ok := true
	used := map[string]int{}
	for i := range r.Files {
		f := &r.Files[i]
		if f.Report == nil {
			continue
		}
		d := dir
		if len(r.Files) > 1 {
			base := strings.TrimSuffix(filepath.Base(f.File), filepath.Ext(f.File))
			used[base]++
			if n := used[base]; n > 1 {
				base += "-" + strconv.Itoa(n)
			}
			d = filepath.Join(dir, base)
		}
		if err := writeOut(d, f.Report); err != nil {
			fmt.Fprintf(stderr, "%s: --out: %v\n", f.File, err)
			ok = false
			continue
		}
		fmt.Fprintf(stderr, "%s: report written to %s\n", f.File, filepath.Join(d, "index.html"))
	}
	return ok
}

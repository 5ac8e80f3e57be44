package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a policy file: where it is and what.
type Problem struct {
	// File names the file: the path given to Load (or Open, Reload), the
	// name given to Parse.
	File string
	// Line and Column are where the problem is in the file, counting from
	// 1; 0 when it has no place there (an empty file, and some problems
	// found when a file is applied). A YAML syntax error has no Column,
	// and a Line when the parser gave one.
	Line, Column int
	// Path is the field, e.g. policies.payments.backoff.max; "" for the
	// whole file.
	Path string
	// Msg says what is wrong, without the location.
	Msg string
}

// Error formats the problem as "file:line: path: message", leaving out
// the line when it is 0, the path when it is "", the file and line when
// both are empty (a File built in code has no name), and never the
// column.
func (p Problem) Error() string {
	loc := p.File
	if p.Line > 0 {
		loc += ":" + strconv.Itoa(p.Line)
	}
	msg := p.Msg
	if p.Path != "" {
		msg = p.Path + ": " + p.Msg
	}
	if loc == "" { // a File built in code has no name
		return msg
	}
	return loc + ": " + msg
}

// Error lists every problem found in a policy file. Load returns it, so a
// bad edit is reported whole, not one problem per attempt.
type Error struct {
	// Problems are the problems found, at least one, in the order they
	// were found.
	Problems []Problem
}

// Error returns the problems, one per line, prefixed by "config: ".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// decoder walks a YAML node tree into the spec types, collecting problems
// with their lines instead of stopping at the first.
type decoder struct {
	file     string
	problems []Problem
	// elsewhere, while decoding a mapping with a kind, reports whether a
	// key belongs to another kind, for a clearer message.
	elsewhere func(key string) bool
	// renamed maps the old names of keys in the mapping being decoded
	// to their new ones.
	renamed map[string]string
}

// valueOf returns the value node of key in the mapping n, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// kindField returns the value of the mapping's "kind" key, if any.
func kindField(n *yaml.Node) string {
	if v := valueOf(n, "kind"); v != nil {
		return v.Value
	}
	return ""
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	p := Problem{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	d.problems = append(d.problems, p)
}

// fields calls visit for each key of the mapping n, rejecting unknown and
// duplicate keys. known lists the accepted keys; nil accepts any key (a
// mapping of names, such as policies).
func (d *decoder) fields(n *yaml.Node, path string, known []string, visit func(key string, v *yaml.Node, path string)) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, not %s", describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		if seen[k.Value] {
			d.fail(k, p, "appears twice")
			continue
		}
		seen[k.Value] = true
		if known != nil && !contains(known, k.Value) {
			if to, ok := d.renamed[k.Value]; ok {
				d.fail(k, p, "renamed to %s, a fraction from 0 to 1", to)
			} else if kind := kindField(n); kind != "" && d.elsewhere != nil && d.elsewhere(k.Value) {
				d.fail(k, p, "does not apply to kind %s (its fields: %s)", kind, strings.Join(sorted(known), ", "))
			} else {
				d.fail(k, p, "unknown field (known: %s)", strings.Join(sorted(known), ", "))
			}
			continue
		}
		visit(k.Value, v, p)
	}
}

// scalar returns the value of a scalar node. A mapping, a list or an empty
// value is reported, and ok is false.
func (d *decoder) scalar(n *yaml.Node, path string) (s string, ok bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.fail(n, path, "must be a value, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// MaxDuration bounds every duration in a policy file: a longer one is
// refused with the field's name. A day is far beyond any sensible
// timeout, delay or window, and keeps sums of durations (a deadline plus
// a delay, twice an interval) far from overflowing.
const MaxDuration = 24 * time.Hour

// duration reads a Go duration ("250ms", "1m30s"); a bare 0 is accepted.
// Negative durations and durations above MaxDuration are rejected.
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	if s == "0" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if durationSyntax.MatchString(s) { // well formed, beyond int64 nanoseconds
			d.fail(n, path, "%q is above the limit of %v for a duration in this file", s, fmtDuration(MaxDuration))
			return 0
		}
		d.fail(n, path, "%q is not a duration (use a number with a unit: 250ms, 2s, 1m)", s)
		return 0
	}
	if v < 0 {
		d.fail(n, path, "%q must not be negative", s)
		return 0
	}
	if v > MaxDuration {
		d.fail(n, path, "%q is above the limit of %v for a duration in this file", s, fmtDuration(MaxDuration))
		return 0
	}
	return v
}

// durationSyntax matches what time.ParseDuration reads, without a sign.
var durationSyntax = regexp.MustCompile(`^([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// fmtDuration writes d without zero minutes and seconds (24h, not 24h0m0s).
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	return s
}

// boolean reads true or false.
func (d *decoder) boolean(n *yaml.Node, path string) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	}
	d.fail(n, path, "%q is not true or false", s)
	return false
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int) int {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		d.fail(n, path, "%q is not a whole number", s)
		return 0
	}
	if v < lo || v > hi {
		d.fail(n, path, "%d is outside [%d, %d]", v, lo, hi)
		return 0
	}
	return v
}

// number reads a float in [lo, hi]; openLo excludes lo itself.
func (d *decoder) number(n *yaml.Node, path string, lo, hi float64, openLo bool) float64 {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail(n, path, "%q is not a number", s)
		return 0
	}
	if v < lo || v > hi || (openLo && v == lo) {
		open := "["
		if openLo {
			open = "("
		}
		d.fail(n, path, "%s is outside %s%s, %s]", s, open, fmtNum(lo), fmtNum(hi))
		return 0
	}
	return v
}

func (d *decoder) list(n *yaml.Node, path string, visit func(i int, v *yaml.Node, path string)) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "must be a list, not %s", describe(n))
		return
	}
	for i, v := range n.Content {
		visit(i, v, path+"["+strconv.Itoa(i)+"]")
	}
}

func (d *decoder) oneOf(n *yaml.Node, path string, choices []string) string {
	s, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if !contains(choices, s) {
		d.fail(n, path, "%q is not one of %s", s, strings.Join(choices, ", "))
		return ""
	}
	return s
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "empty"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// secondDocument reports the first YAML document after the first that
// holds anything: a policy file holds one document, and the service would
// otherwise read the first alone and drop the rest without a word. An
// empty document (a trailing --- or ...) is no problem. A syntax error
// after the first document is reported too, for the same reason.
func secondDocument(name string, data []byte) (Problem, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		return Problem{}, false // empty or invalid: Parse reports it
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return Problem{}, false
		}
		if err != nil {
			return syntaxProblem(name, err), true
		}
		if len(next.Content) == 0 {
			continue
		}
		c := next.Content[0]
		if c.Kind == yaml.ScalarNode && c.Tag == "!!null" && c.Value == "" {
			continue // an empty document
		}
		return Problem{File: name, Line: c.Line, Column: c.Column,
			Msg: "a second YAML document: a policy file holds one; merge them or split the file"}, true
	}
}

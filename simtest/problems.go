package simtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/config"
	"go.yaml.in/yaml/v3"
)

// FormatProblem writes p as every problem line of stormsim check is
// written, "file:line:col: path: message" (no path when the problem is
// not in a field), the form editors and CI problem matchers parse. A
// problem of the whole file (unreadable, empty) is at 1:1.
func FormatProblem(p Problem) string {
	line, col := max(p.Line, 1), max(p.Column, 1)
	msg := p.Msg
	if p.Path != "" {
		msg = p.Path + ": " + msg
	}
	return p.File + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col) + ": " + msg
}

// Problems returns the problems err holds: those of an *Error or a
// config.Error, one problem of file for any other error (its message
// without the package prefix), nil for nil.
func Problems(file string, err error) []Problem {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return se.Problems
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce.Problems
	}
	msg := err.Error()
	for _, pre := range []string{"check: ", "simtest: ", "config: "} {
		msg = strings.TrimPrefix(msg, pre)
	}
	msg = strings.TrimPrefix(msg, file+": ")
	return []Problem{{File: file, Msg: msg}}
}

// aliasProblems reports every YAML alias (*name) and merge key (<<) in
// the document: the loader would read an alias as a value of the wrong
// kind and a merge key as an unknown field, in words that hide the cause.
func aliasProblems(name string, root *yaml.Node) []Problem {
	var out []Problem
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.AliasNode:
			out = append(out, Problem{File: name, Line: n.Line, Column: n.Column,
				Msg: fmt.Sprintf("YAML aliases are not supported (*%s): write the value out in full", n.Value)})
			return
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Value == "<<" && k.Tag == "!!merge" {
					out = append(out, Problem{File: name, Line: k.Line, Column: k.Column,
						Msg: "YAML merge keys (<<) are not supported: write the fields out in full"})
					continue
				}
				walk(n.Content[i])
				walk(n.Content[i+1])
			}
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	return out
}

// parserWords rewrites the YAML parser's messages in the project's words.
var parserWords = []struct {
	raw  string
	word string
}{
	{"found character that cannot start any token", "a value cannot start with this character: quote the value"},
	{"found a tab character that violates indentation", tabs},
	{"found a tab character where an indentation space is expected", tabs},
	{"did not find expected key", "this line does not line up with the keys above it: check its indentation (a key lines up with the keys beside it, a list item is not allowed here)"},
	{"did not find expected node content", "a value is missing: an unclosed [ or {, or a - or : with nothing after it"},
	{"did not find expected ',' or '}'", "an unclosed {: a flow mapping needs a , between its entries and a closing }"},
	{"did not find expected ',' or ']'", "an unclosed [: a flow list needs a , between its items and a closing ]"},
	{"did not find expected '-' indicator", "this line does not line up with the list items above it: check its indentation"},
	{"found unexpected end of stream", "the file ends inside a quoted value: a quote is not closed"},
	{"mapping values are not allowed in this context", "a colon and a space inside a value: quote the value, or put the key on a line of its own"},
	{"could not find expected ':'", "a key without a colon: write key: value"},
	{"block sequence entries are not allowed in this context", "a list item (- ) where a value is expected: start the list on the line after its key"},
	{"found unknown directive name", "YAML directives (%) are not supported: remove the line"},
	{"found undefined tag handle", "YAML tags (!) are not supported: remove the tag"},
	{"found duplicate %YAML directive", "YAML directives (%) are not supported: remove the line"},
	{"found incompatible YAML document", "YAML directives (%) are not supported: remove the line"},
	{"invalid leading UTF-8 octet", "the file is not UTF-8 text"},
	{"invalid trailing UTF-8 octet", "the file is not UTF-8 text"},
	{"incomplete UTF-8 octet sequence", "the file is not UTF-8 text"},
	{"control characters are not allowed", "a control character: the file must be printable UTF-8 text"},
	{"found unexpected document indicator", "a --- or ... inside a quoted value: close the quote before it"},
}

const tabs = "tabs are not allowed for indentation: indent with spaces"

var reAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// explain rewrites a problem the YAML parser raised in the project's
// words, at the line and column where the file stops being YAML (the
// parser often names the line where the enclosing mapping starts, or
// none). Other problems are returned as they are.
func explain(data []byte, p Problem) Problem {
	if p.Path != "" {
		return p
	}
	if m := reAnchor.FindStringSubmatch(p.Msg); m != nil {
		p.Msg = fmt.Sprintf("YAML aliases are not supported (*%s, and no anchor &%s defines it): write the value out in full", m[1], m[1])
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			p.Line, p.Column = lineCol(data, i)
		}
		return p
	}
	word := ""
	for _, w := range parserWords {
		if p.Msg == w.raw || strings.HasPrefix(p.Msg, w.raw) {
			word = w.word
			break
		}
	}
	if word == "" {
		if !looksLikeParser(p.Msg) {
			return p
		}
		word = "not valid YAML (" + p.Msg + ")"
	}
	lines := splitLines(data)
	if n := failingLine(lines, p.Msg); n > 0 {
		p.Line = n
	}
	if p.Line < 1 || p.Line > len(lines) {
		p.Msg = word
		return p
	}
	text := lines[p.Line-1]
	p.Column = 0
	if word == tabs || strings.HasPrefix(p.Msg, "found character that cannot start any token") {
		indent := len(text) - len(bytes.TrimLeft(text, " \t-"))
		if i := bytes.IndexByte(text[:indent], '\t'); i >= 0 {
			word, p.Column = tabs, i+1
		} else if i := bytes.IndexAny(text, "@`"); i >= 0 {
			word, p.Column = fmt.Sprintf("a value cannot start with %q: quote the value", text[i]), i+1
		} else if i := bytes.IndexByte(text, '\t'); i >= 0 {
			word, p.Column = "a tab where YAML does not allow one: use spaces", i+1
		}
	}
	if p.Column == 0 {
		p.Column = len(text) - len(bytes.TrimLeft(text, " ")) + 1
	}
	p.Msg = word
	return p
}

// looksLikeParser says whether msg is one of the YAML parser's own.
func looksLikeParser(msg string) bool {
	for _, pre := range []string{"found ", "did not find ", "could not find ", "invalid ", "expected ", "while "} {
		if strings.HasPrefix(msg, pre) {
			return true
		}
	}
	return strings.Contains(msg, "not allowed in this context")
}

// failingLine returns the first line n such that the first n lines of the
// file fail to parse with msg, found by bisection (O(log lines) parses),
// or 0 when the whole file does not fail so.
func failingLine(lines [][]byte, msg string) int {
	fails := func(n int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(bytes.Join(lines[:n], nil)))
		for {
			var node yaml.Node
			err := dec.Decode(&node)
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				return false
			}
			m := strings.TrimPrefix(err.Error(), "yaml: ")
			if r := reLine.FindStringSubmatch(m); r != nil {
				m = r[2]
			}
			return m == msg
		}
	}
	lo, hi := 0, len(lines)
	if !fails(hi) {
		return 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// lineCol is the 1-based line and column of byte offset i.
func lineCol(data []byte, i int) (int, int) {
	start := 0
	if k := bytes.LastIndexAny(data[:i], "\n\r\u0085\u2028\u2029"); k >= 0 {
		start = k + 1
	}
	return len(splitLines(data[:i])), i - start + 1
}

// explained returns err with every problem rewritten by explain.
func explained(data []byte, err error) error {
	var se *Error
	if errors.As(err, &se) {
		out := &Error{Problems: make([]Problem, len(se.Problems))}
		for i, p := range se.Problems {
			out.Problems[i] = explain(data, p)
		}
		return out
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		out := &config.Error{Problems: make([]Problem, len(ce.Problems))}
		for i, p := range ce.Problems {
			out.Problems[i] = explain(data, p)
		}
		return out
	}
	return err
}

// checkAliases returns an *Error listing the aliases and merge keys of
// data, or nil (also when data is not YAML: the loader reports that).
func checkAliases(name string, data []byte) error {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	if ps := aliasProblems(name, &root); len(ps) > 0 {
		return &Error{ps}
	}
	return nil
}

package promretry_test

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// selector is a metric named in a PromQL expression, with the label names
// its matchers use.
type selector struct {
	metric string
	labels []string
}

// promqlKeywords are identifiers that are not metric names when they are
// not followed by "(".
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "inf": true, "nan": true,
	"start": true, "end": true, "atan2": true,
	// Aggregation operators, which may be followed by "by (...)" before
	// their "(".
	"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true,
	"bottomk": true, "topk": true, "quantile": true, "limitk": true,
	"limit_ratio": true,
}

// labelListKeywords take a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// metricSelectors extracts the metric names of a PromQL expression (and
// Grafana's label_values(selector, label) form) with a small tokenizer:
// identifiers not followed by "(" and not keywords are metric names;
// strings, numbers and durations, range brackets and label lists after
// by/without/on/ignoring/group_* are skipped; "{...}" gives the matchers'
// label names, and a bare "{...}" (no metric name) its __name__ if any.
// It is not a full parser: it checks balance and token shapes only.
func metricSelectors(expr string) ([]selector, error) {
	var out []selector
	// label_values(selector, label): the last argument is a label name of
	// the selector's metric.
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "label_values("); ok {
		rest, ok = strings.CutSuffix(strings.TrimSpace(rest), ")")
		if !ok {
			return nil, fmt.Errorf("label_values without closing parenthesis: %q", expr)
		}
		i := strings.LastIndexByte(rest, ',')
		if i < 0 {
			return nil, fmt.Errorf("label_values without a label: %q", expr)
		}
		sels, err := metricSelectors(rest[:i])
		if err != nil {
			return nil, err
		}
		if len(sels) != 1 {
			return nil, fmt.Errorf("label_values of %d metrics: %q", len(sels), expr)
		}
		sels[0].labels = append(sels[0].labels, strings.TrimSpace(rest[i+1:]))
		return sels, nil
	}

	depth := 0
	i := 0
	for i < len(expr) {
		r, size := utf8.DecodeRuneInString(expr[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return nil, fmt.Errorf("invalid UTF-8 at %d", i)
		case unicode.IsSpace(r):
			i += size
		case r == '#': // comment to end of line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case r == '"' || r == '\'' || r == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			// Numbers and durations: 1, 0.5, 1e3, 0x1f, 5m, 1h30m.
			for i < len(expr) && (isIdentByte(expr[i]) || expr[i] == '.') {
				i++
			}
		case r == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed '[' at %d", i)
			}
			i += end + 1
		case r == '{':
			labels, name, end, err := matchers(expr, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				out = append(out, selector{metric: name, labels: labels})
			} else if len(out) > 0 && out[len(out)-1].labels == nil && lastIdentEnd(expr, i) {
				out[len(out)-1].labels = labels
			} else {
				return nil, fmt.Errorf("matchers without a metric name at %d", i)
			}
			i = end
		case r == '(':
			depth++
			i++
		case r == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ')' at %d", i)
			}
			i++
		case r == '}' || r == ']':
			return nil, fmt.Errorf("unbalanced %q at %d", r, i)
		case r == '$': // a Grafana variable outside a string
			i++
			for i < len(expr) && isIdentByte(expr[i]) {
				i++
			}
		case isIdentStart(r):
			start := i
			for i < len(expr) && (isIdentByte(expr[i]) || expr[i] == ':') {
				i++
			}
			word := expr[start:i]
			j := skipSpace(expr, i)
			switch {
			case j < len(expr) && expr[j] == '(':
				if labelListKeywords[word] { // by (a, b)
					end := strings.IndexByte(expr[j:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed label list after %s", word)
					}
					i = j + end + 1
				}
				// else a function or aggregation: its '(' is read next
			case labelListKeywords[word] || promqlKeywords[word]:
			default:
				out = append(out, selector{metric: word})
			}
		default:
			i += size // operators and commas
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '(' in %q", expr)
	}
	return out, nil
}

// lastIdentEnd reports whether the text before position i, spaces aside,
// ends with an identifier character (a metric name followed by "{").
func lastIdentEnd(expr string, i int) bool {
	for i > 0 && strings.IndexByte(" \t\r\n", expr[i-1]) >= 0 {
		i--
	}
	return i > 0 && (isIdentByte(expr[i-1]) || expr[i-1] == ':')
}

// matchers reads "{...}" at i and returns its label names, the metric name
// given as a __name__ matcher or a bare quoted name, and the index after
// "}".
func matchers(expr string, i int) (labels []string, name string, end int, err error) {
	labels = []string{}
	i++ // '{'
	for {
		i = skipSpace(expr, i)
		if i >= len(expr) {
			return nil, "", 0, fmt.Errorf("unclosed '{'")
		}
		switch c := expr[i]; {
		case c == '}':
			return labels, name, i + 1, nil
		case c == ',':
			i++
		case c == '"':
			// {"metric.name"} (UTF-8 names in Prometheus 3)
			e, err := skipString(expr, i)
			if err != nil {
				return nil, "", 0, err
			}
			name = expr[i+1 : e-1]
			i = e
		case isIdentStart(rune(c)):
			start := i
			for i < len(expr) && isIdentByte(expr[i]) {
				i++
			}
			label := expr[start:i]
			i = skipSpace(expr, i)
			op := ""
			for _, o := range []string{"=~", "!~", "!=", "="} {
				if strings.HasPrefix(expr[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, "", 0, fmt.Errorf("matcher %q without an operator", label)
			}
			i = skipSpace(expr, i+len(op))
			if i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
				return nil, "", 0, fmt.Errorf("matcher %q without a quoted value", label)
			}
			e, err := skipString(expr, i)
			if err != nil {
				return nil, "", 0, err
			}
			if label == "__name__" && op == "=" {
				name = expr[i+1 : e-1]
			} else {
				labels = append(labels, label)
			}
			i = e
		default:
			return nil, "", 0, fmt.Errorf("unexpected %q in matchers", c)
		}
	}
}

// skipString returns the index after the string literal starting at i.
func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d", i)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isIdentStart(r rune) bool {
	return r == '_' || r == ':' || r < utf8.RuneSelf && unicode.IsLetter(r)
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/stormguard/stormguard/sim"
)

// writeTable prints t as aligned text (see sim.Table.WriteTo) followed by
// a blank line.
func writeTable(w io.Writer, t sim.Table) {
	t.WriteTo(w)
	fmt.Fprintln(w)
}

// writeSummary prints a scenario's verdict and the definitions of the
// policies its tables compare, under its tables.
func writeSummary(w io.Writer, verdict []string, legend [][2]string) {
	if len(verdict) > 0 {
		fmt.Fprintln(w, "Verdict:")
		for _, v := range verdict {
			fmt.Fprint(w, wrap(v, "  ", 100))
		}
	}
	if len(legend) > 0 {
		fmt.Fprintln(w, "Policies:")
		width := 0
		for _, l := range legend {
			width = max(width, utf8.RuneCountInString(l[0]))
		}
		for _, l := range legend {
			prefix := "  " + l[0] + strings.Repeat(" ", width-utf8.RuneCountInString(l[0])) + "  "
			fmt.Fprint(w, hang(prefix, l[1], 100))
		}
	}
	if len(verdict)+len(legend) > 0 {
		fmt.Fprintln(w)
	}
}

// hang returns prefix then s wrapped at width runes, continuation lines
// indented as far as prefix.
func hang(prefix, s string, width int) string {
	var b strings.Builder
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix))
	b.WriteString(prefix)
	col := len(indent)
	for i, word := range strings.Fields(s) {
		wl := utf8.RuneCountInString(word)
		switch {
		case i == 0:
			b.WriteString(word)
			col += wl
		case col+1+wl > width:
			b.WriteString("\n" + indent + word)
			col = len(indent) + wl
		default:
			b.WriteString(" " + word)
			col += 1 + wl
		}
	}
	b.WriteString("\n")
	return b.String()
}

// wrap returns s as lines of at most width runes (words permitting), the
// first indented by indent, the others by two more spaces.
func wrap(s, indent string, width int) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(s) {
		wl := utf8.RuneCountInString(word)
		switch {
		case i == 0:
			b.WriteString(indent + word)
			col = len(indent) + wl
		case col+1+wl > width:
			b.WriteString("\n" + indent + "  " + word)
			col = len(indent) + 2 + wl
		default:
			b.WriteString(" " + word)
			col += 1 + wl
		}
	}
	b.WriteString("\n")
	return b.String()
}

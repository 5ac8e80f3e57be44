package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/stormguard/stormguard/sim"
)

// writeTable prints t with aligned columns: the first left-aligned, the
// others right-aligned, a rule under the header.
func writeTable(w io.Writer, t sim.Table) {
	widths := make([]int, len(t.Header))
	measure := func(row []string) {
		for i, cell := range row {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(cell))
			}
		}
	}
	measure(t.Header)
	for _, r := range t.Rows {
		measure(r)
	}
	line := func(row []string) {
		var b strings.Builder
		for i := range widths {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintln(w, t.Title)
	line(t.Header)
	total := 0
	for _, wd := range widths {
		total += wd
	}
	fmt.Fprintln(w, strings.Repeat("-", total+2*(len(widths)-1)))
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w)
}

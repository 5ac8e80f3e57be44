package main

import (
	"fmt"
	"io"

	"github.com/stormguard/stormguard/sim"
)

// writeTable prints t as aligned text (see sim.Table.WriteTo) followed by
// a blank line.
func writeTable(w io.Writer, t sim.Table) {
	t.WriteTo(w)
	fmt.Fprintln(w)
}

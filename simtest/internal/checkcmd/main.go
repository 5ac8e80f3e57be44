// Command checkcmd is stormsim check on its own: the tests build it and
// run it as a binary to see its exit codes and messages as a CI job does.
package main

import (
	"os"

	"github.com/stormguard/stormguard/simtest"
)

func main() {
	os.Exit(simtest.Main(os.Args[1:], os.Stdout, os.Stderr))
}

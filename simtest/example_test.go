//go:build !race

// The examples run whole storms on the default downstream: like the tests
// marked fullModel, they are left out of the race detector's build and
// run by make test's sim-full job.

package simtest_test

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/stormguard/stormguard/simtest"
)

// Main is stormsim check: here a policy without a retry budget against a
// 1.5× amplification gate at 50% failures.
func ExampleMain() {
	var stdout, stderr strings.Builder
	code := simtest.Main([]string{"--storms", "errors-50", "--max-amplification", "1.5", "testdata/nobudget.yaml"}, &stdout, &stderr)
	fmt.Println("exit", code)
	printMatching(&stdout, "FAIL ")
	// Output:
	// exit 1
	// FAIL nobudget
}

// The same policy through a budget passes.
func ExampleMain_pass() {
	var stdout, stderr strings.Builder
	code := simtest.Main([]string{"--storms", "errors-50", "--max-amplification", "1.5", "testdata/budgeted.yaml"}, &stdout, &stderr)
	fmt.Println("exit", code)
	printMatching(&stdout, "PASS ")
	// Output:
	// exit 0
	// PASS budgeted
}

func printMatching(r fmt.Stringer, prefix string) {
	sc := bufio.NewScanner(io.Reader(strings.NewReader(r.String())))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			fmt.Println(sc.Text())
		}
	}
}

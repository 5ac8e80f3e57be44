package simtest_test

import (
	"io"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// BenchmarkMainReadmeExample is stormsim check on the root README's
// example policy file: the whole suite (five storms) with the default
// downstream, and with testdata/downstream.yaml.
func BenchmarkMainReadmeExample(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"default", []string{"testdata/policies.yaml"}},
		{"downstream.yaml", []string{"--downstream", "testdata/downstream.yaml", "testdata/policies.yaml"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if code := simtest.Main(c.args, io.Discard, io.Discard); code == simtest.ExitUsage {
					b.Fatal("exit 2")
				}
			}
		})
	}
}

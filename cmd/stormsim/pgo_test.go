package main

import (
	"context"
	"io"
	"os"
	"runtime/pprof"
	"testing"
)

// TestWriteDefaultPGO rewrites default.pgo, the CPU profile that go build
// uses for profile-guided optimisation of stormsim (issue #36): a profile
// of the default suite (stormsim --seed 1 --json --quiet). It runs only
// when STORMSIM_WRITE_PGO is 1:
//
//	STORMSIM_WRITE_PGO=1 go test -run '^TestWriteDefaultPGO$' ./cmd/stormsim
//
// Refresh it after large changes to the simulator's hot paths; a stale
// profile only optimises less, the output is the same.
func TestWriteDefaultPGO(t *testing.T) {
	if os.Getenv("STORMSIM_WRITE_PGO") != "1" {
		t.Skip("set STORMSIM_WRITE_PGO=1 to rewrite default.pgo")
	}
	f, err := os.Create("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	code := run(context.Background(), []string{"--seed", "1", "--json", "--quiet"}, io.Discard, io.Discard, false)
	pprof.StopCPUProfile()
	if code != exitOK {
		t.Fatalf("stormsim --seed 1 --json --quiet: exit %d", code)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

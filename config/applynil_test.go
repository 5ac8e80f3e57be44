package config

import (
	"errors"
	"testing"
)

// TestApplyNilFileIsRefused: Apply(nil) dereferenced the File and
// panicked. It returns a *config.Error, reported like any rejected file,
// and the policies in force keep serving. (A Problem without file or line
// is written without the empty location: "config: no file: ...".)
func TestApplyNilFileIsRefused(t *testing.T) {
	var reported []error
	r := NewRegistry(Options{Logger: discard, OnReload: func(_ string, err error) { reported = append(reported, err) }})
	defer r.Close()
	if err := r.Apply(&File{Version: "1", Policies: map[string]*PolicySpec{"p": {MaxAttempts: 5}}}); err != nil {
		t.Fatal(err)
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("Apply(nil) panicked: %v", v)
			}
		}()
		err = r.Apply(nil)
	}()
	var fe *Error
	if !errors.As(err, &fe) || err.Error() != "config: no file: Apply was given a nil *File" {
		t.Fatalf("Apply(nil) = %v, want the *config.Error \"config: no file: Apply was given a nil *File\"", err)
	}
	if len(reported) != 2 || reported[1] != err {
		t.Errorf("OnReload heard %v, want the applied file then Apply(nil)'s error", reported)
	}
	if _, rejected := r.Stats(); rejected != 1 {
		t.Errorf("rejected = %d, want 1", rejected)
	}
	if r.Version() != "1" || r.Policy("p").Policy().MaxAttempts != 5 {
		t.Errorf("after Apply(nil): version %q, MaxAttempts %d; want the file in force", r.Version(), r.Policy("p").Policy().MaxAttempts)
	}
}

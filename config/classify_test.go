package config

import (
	"errors"
	"net/http"
	"syscall"
	"testing"
)

func TestClassifiersFromRetryOn(t *testing.T) {
	f, err := Load("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pay := f.Policies["payments"] // http_status [429, 502, 503, 504], grpc [UNAVAILABLE, RESOURCE_EXHAUSTED]
	classify := pay.HTTPClassifier()
	for code, want := range map[int]bool{429: true, 503: true, 500: false, 408: false, 404: false} {
		if got := classify(&http.Response{StatusCode: code}, nil); got != want {
			t.Errorf("status %d: retry=%v, want %v", code, got, want)
		}
	}
	if !classify(nil, syscall.ECONNREFUSED) || classify(nil, errors.New("tls: handshake failure")) {
		t.Error("errors without a response must use httpretry's classification")
	}
	grpc, ok := pay.GRPCRetryable()
	if !ok || !grpc(14) || !grpc(8) || grpc(3) || grpc(99) {
		t.Errorf("grpc predicate: ok=%v 14=%v 8=%v 3=%v", ok, grpc(14), grpc(8), grpc(3))
	}
	def := f.Policies["default"]
	if _, ok := def.GRPCRetryable(); ok {
		t.Error("a policy without grpc_codes must keep the interceptor's table")
	}
	if !def.HTTPClassifier()(&http.Response{StatusCode: 503}, nil) || def.HTTPClassifier()(&http.Response{StatusCode: 404}, nil) {
		t.Error("a policy without http_status must use httpretry.DefaultClassifier")
	}
}

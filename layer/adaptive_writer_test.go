package layer_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/layer"
)

// bareWriter is a ResponseWriter with every optional interface of
// net/http's own, that allocates nothing and records which method the
// handler's writes reached.
type bareWriter struct {
	h                                  http.Header
	status                             int
	writes, strings, readFroms, pushes int
	n                                  int64
}

func (w *bareWriter) Header() http.Header  { return w.h }
func (w *bareWriter) WriteHeader(code int) { w.status = code }
func (w *bareWriter) Write(b []byte) (int, error) {
	w.writes++
	w.n += int64(len(b))
	return len(b), nil
}
func (w *bareWriter) WriteString(s string) (int, error) {
	w.strings++
	w.n += int64(len(s))
	return len(s), nil
}
func (w *bareWriter) ReadFrom(r io.Reader) (int64, error) {
	w.readFroms++
	n, err := io.Copy(io.Discard, r)
	w.n += n
	return n, err
}
func (w *bareWriter) Flush() {}
func (w *bareWriter) Push(string, *http.PushOptions) error {
	w.pushes++
	return nil
}

// TestAdaptiveWriterCostsOneAllocation (issue 38): Adaptive's doc says one
// allocation per request, the writer that holds the slot. A handler that
// writes with io.WriteString, as most do, cost a second one: the wrapper
// had no WriteString, so the string was copied into a new []byte.
func TestAdaptiveWriterCostsOneAllocation(t *testing.T) {
	l := newAdmission(t, admission.Config{})
	h := layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := &bareWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); n != 1 {
		t.Fatalf("Adaptive with a handler calling io.WriteString allocates %v times a request, want 1 (its writer)", n)
	}
	if w.strings == 0 || w.writes != 0 {
		t.Fatalf("WriteString reached the writer %d times, Write %d: want WriteString passed on", w.strings, w.writes)
	}
}

// TestAdaptiveWriterPassesOptionalInterfaces: the writer Adaptive hands
// the handler keeps the optional interfaces of the one it wraps —
// io.StringWriter, io.ReaderFrom (sendfile for io.Copy from a file),
// http.Flusher, http.Pusher, http.Hijacker — and still notes the status
// each of them implies.
func TestAdaptiveWriterPassesOptionalInterfaces(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1})
	var got []string
	h := layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for _, c := range []struct {
			name string
			ok   bool
		}{
			{"io.StringWriter", is[io.StringWriter](w)},
			{"io.ReaderFrom", is[io.ReaderFrom](w)},
			{"http.Flusher", is[http.Flusher](w)},
			{"http.Pusher", is[http.Pusher](w)},
			{"http.Hijacker", is[http.Hijacker](w)},
		} {
			if !c.ok {
				got = append(got, c.name)
			}
		}
		if p, ok := w.(http.Pusher); ok {
			if err := p.Push("/style.css", nil); err != nil {
				t.Errorf("Push: %v", err)
			}
		}
		if rf, ok := w.(io.ReaderFrom); ok {
			rf.ReadFrom(strings.NewReader("body"))
		}
	}))
	w := &bareWriter{h: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if len(got) > 0 {
		t.Fatalf("the handler's writer lacks %v", got)
	}
	if w.readFroms != 1 || w.pushes != 1 || w.n != 4 {
		t.Fatalf("ReadFrom reached the writer %d times (%d bytes), Push %d: want each passed on", w.readFroms, w.n, w.pushes)
	}
	if l.InFlight() != 0 {
		t.Fatal("the slot was not given back")
	}
}

// TestAdaptiveWriterWithoutOptionalInterfaces: over a writer that has
// none of them, each still works (WriteString and ReadFrom by Write;
// Push and Hijack refuse with http.ErrNotSupported).
func TestAdaptiveWriterWithoutOptionalInterfaces(t *testing.T) {
	l := newAdmission(t, admission.Config{})
	var pushErr, hijackErr error
	h := layer.Adaptive(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "a")
		w.(io.ReaderFrom).ReadFrom(strings.NewReader("bc"))
		pushErr = w.(http.Pusher).Push("/x", nil)
		_, _, hijackErr = w.(http.Hijacker).Hijack()
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(plainWriter{rec}, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Body.String() != "abc" || rec.Code != http.StatusOK {
		t.Fatalf("body %q, status %d; want abc, 200", rec.Body.String(), rec.Code)
	}
	if !errors.Is(pushErr, http.ErrNotSupported) || !errors.Is(hijackErr, http.ErrNotSupported) {
		t.Fatalf("Push: %v, Hijack: %v; want http.ErrNotSupported", pushErr, hijackErr)
	}
}

// plainWriter hides every method of its writer but the three of
// http.ResponseWriter.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }

func is[T any](w http.ResponseWriter) bool { _, ok := w.(T); return ok }

// TestHandlerFuncWriterPassesStringAndReadFrom: the writer HandlerFunc
// (and so Middleware, and Adaptive over a HandlerFunc) hands the handler
// passes io.WriteString, io.Copy and Push on to the writer it wraps, so
// neither copies and HTTP/2 push still works, and a response
// begun either way is not answered a second time.
func TestHandlerFuncWriterPassesStringAndReadFrom(t *testing.T) {
	h := layer.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		io.WriteString(w, "a")
		w.(io.ReaderFrom).ReadFrom(strings.NewReader("bc"))
		return errors.New("after the response began")
	})
	w := &bareWriter{h: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	var pushed bool
	layer.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		p, ok := w.(http.Pusher)
		pushed = ok && p.Push("/style.css", nil) == nil
		return nil
	}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if !pushed || w.pushes != 1 {
		t.Fatalf("Push through HandlerFunc's writer: passed on %v (%d pushes), want the wrapped writer's Push", pushed, w.pushes)
	}
	if w.strings != 1 || w.readFroms != 1 || w.writes != 0 || w.n != 3 {
		t.Fatalf("WriteString reached the writer %d times, ReadFrom %d, Write %d (%d bytes): want each passed on, no Write", w.strings, w.readFroms, w.writes, w.n)
	}
	if w.status != 0 {
		t.Fatalf("a begun response was answered again with %d", w.status)
	}
	rec := httptest.NewRecorder()
	layer.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		io.WriteString(w, "x")
		w.(io.ReaderFrom).ReadFrom(strings.NewReader("yz"))
		return nil
	}).ServeHTTP(plainWriter{rec}, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Body.String() != "xyz" {
		t.Fatalf("over a writer without them, body %q, want xyz", rec.Body.String())
	}
}

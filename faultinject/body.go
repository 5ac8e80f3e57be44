package faultinject

import (
	"bytes"
	"io"
	"net/http"
	"time"
)

// Over HTTP/1.x, net/http notices that a client has left (and cancels the
// request's context) only once the request body has been read to its end:
// only then does it start reading the connection in the background. A
// request the Injector holds (hanging, queued, delayed) with an unread
// body would never notice its caller leaving. The helpers here read the
// body while the request is held, on a goroutine that never outlives the
// handler. HTTP/2 and later watch their streams anyway: their bodies are
// left alone.

// maxPrefetch bounds the body a queued or delayed request reads ahead: the
// body must be handed on intact if the request passes, so it is kept in
// memory.
const maxPrefetch = 64 << 10

// aLongTimeAgo is a read deadline in the past: it ends a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// bodyReader reads a request body on its own goroutine.
type bodyReader struct {
	done chan struct{} // closed when the read has ended
	buf  []byte        // what was read, when kept
	err  error         // the read's error, nil at the body's end
}

// stop ends the read, with a read deadline in the past if it has not ended
// yet, and waits for it. A ResponseWriter without read deadlines cannot
// interrupt it; the server ends it when it closes the body after the
// handler returns.
func (b *bodyReader) stop(w http.ResponseWriter) {
	select {
	case <-b.done:
		return
	default:
	}
	if http.NewResponseController(w).SetReadDeadline(aLongTimeAgo) != nil {
		return
	}
	<-b.done
}

// watchable reports whether r's body must be read for the server to notice
// its client leaving.
func watchable(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody
}

// drainBody reads and discards r's body in the background, for a hang:
// the request will not pass, so any size is read. The caller must stop the
// returned reader before the handler returns; nil when there is nothing
// to drain.
func drainBody(r *http.Request) *bodyReader {
	if !watchable(r) {
		return nil
	}
	b := &bodyReader{done: make(chan struct{})}
	body := r.Body
	go func() {
		defer close(b.done)
		_, b.err = io.Copy(io.Discard, body)
	}()
	return b
}

// prefetch reads a queued or delayed server request's body ahead, so that
// the server notices its client leaving while it waits. Only bodies of a
// known length up to maxPrefetch are read (the body is kept, to be handed
// on if the request passes). The zero prefetch with w and r set is ready;
// the client side passes a nil *prefetch.
type prefetch struct {
	w  http.ResponseWriter
	r  *http.Request
	br *bodyReader // nil until started
}

// start begins the read ahead, once; it does nothing for a nil p or a body
// it does not read.
func (p *prefetch) start() {
	if p == nil || p.br != nil || !watchable(p.r) || p.r.ContentLength <= 0 || p.r.ContentLength > maxPrefetch {
		return
	}
	b := &bodyReader{done: make(chan struct{})}
	p.br = b
	body, n := p.r.Body, p.r.ContentLength
	go func() {
		defer close(b.done)
		b.buf, b.err = io.ReadAll(io.LimitReader(body, n+1)) // to the body's end, which starts net/http's watch
	}()
}

// handOn replaces the request's body, for the wrapped handler, with one
// that serves what the read ahead got (once it has ended), then the rest.
func (p *prefetch) handOn() {
	if p.br != nil {
		p.r.Body = &prefetchedBody{br: p.br, orig: p.r.Body}
	}
}

// stop ends the read ahead and waits for it (see bodyReader.stop).
func (p *prefetch) stop() {
	if p.br != nil {
		p.br.stop(p.w)
	}
}

// prefetchedBody is a request body read ahead by a prefetch.
type prefetchedBody struct {
	br   *bodyReader
	orig io.ReadCloser
	rest *bytes.Reader // nil until the read ahead has ended
}

func (b *prefetchedBody) Read(p []byte) (int, error) {
	if b.rest == nil {
		<-b.br.done
		b.rest = bytes.NewReader(b.br.buf)
	}
	if b.rest.Len() > 0 {
		return b.rest.Read(p)
	}
	if b.br.err != nil {
		return 0, b.br.err
	}
	return b.orig.Read(p) // at its end: io.EOF
}

func (b *prefetchedBody) Close() error {
	<-b.br.done
	return b.orig.Close()
}

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressBar draws a one-line bar on a terminal for runs that take longer
// than a second. It is only ever enabled for a terminal (see isTerminal),
// so redirected output never sees it.
type progressBar struct {
	w       io.Writer
	label   string
	start   time.Time
	last    time.Time
	shown   bool
	enabled bool
	now     func() time.Time
}

// progressDelay is how long a run goes before the bar appears.
const progressDelay = time.Second

func newProgress(w io.Writer, enabled bool, label string) *progressBar {
	p := &progressBar{w: w, label: label, enabled: enabled, now: time.Now}
	p.start = p.now()
	return p
}

// update redraws the bar, at most ten times a second.
func (p *progressBar) update(done, total int) {
	if !p.enabled || total <= 0 {
		return
	}
	now := p.now()
	if now.Sub(p.start) < progressDelay || (now.Sub(p.last) < 100*time.Millisecond && done < total) {
		return
	}
	p.last = now
	p.shown = true
	const width = 30
	filled := done * width / total
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	fmt.Fprintf(p.w, "\r%-16s [%s] %3d%% %5.1fs", p.label, bar, done*100/total, now.Sub(p.start).Seconds())
}

// finish erases the bar if it was drawn.
func (p *progressBar) finish() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// isTerminal reports whether f is a character device (a terminal) and
// TERM does not say it cannot draw.
func isTerminal(f *os.File) bool {
	if os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

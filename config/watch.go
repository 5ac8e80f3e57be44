package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stormguard/stormguard/clock"
)

// DefaultDebounce is how long Watch waits after the last event of the
// policy file before it reloads, so an editor's burst of writes is read
// once.
const DefaultDebounce = 100 * time.Millisecond

// DefaultRetryInterval is how often Watch tries again to watch a
// directory whose watch was lost, and checks again a policy file that is
// missing.
const DefaultRetryInterval = time.Second

// maxDelayFactor is MaxDelay's default, in debounces.
const maxDelayFactor = 10

// WatchOptions tune Watch.
type WatchOptions struct {
	// Debounce delays a reload until the policy file's events stop for
	// this long. 0: DefaultDebounce.
	Debounce time.Duration
	// MaxDelay bounds how long a burst of events can postpone a reload:
	// the reload comes at most MaxDelay after the burst's first event,
	// even while events go on. 0: 10 × Debounce. Below Debounce: Debounce.
	MaxDelay time.Duration
	// RetryInterval is how often, while a directory Watch must watch
	// cannot be watched (deleted, renamed away, made again) or the policy
	// file is missing, Watch tries again and reports that it still is:
	// the lost watch as a watch error (ErrWatchLost), the missing file as
	// a rejected reload (os.ErrNotExist). 0: DefaultRetryInterval.
	RetryInterval time.Duration
}

// Watcher follows a policy file for a Registry from Registry.Watch until
// it is closed.
type Watcher struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Close stops the watch and waits until it has stopped: no reload starts
// after Close returns, and the policies in force keep serving. Calling it
// again does nothing. It returns nil.
func (w *Watcher) Close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

// Watch starts following the file at path and returns once the watch is
// in place and the file has been read: every error up to that point is
// returned, and a nil error means the watch runs until Close. The start is
// synchronous, so nothing needs a goroutine of its own and no error is
// lost in one:
//
//	reg, err := config.Open(path, opts) // a valid file, or no registry
//	if err != nil {
//		return err
//	}
//	w, err := reg.Watch(path, config.WatchOptions{})
//	if err != nil { // no watcher could be set up: refuse to start, or serve without reloads
//		return err
//	}
//	defer w.Close()
//
// Watch reads the file once after the watch is in place, so an edit made
// between Open and Watch is not missed. If the registry has no policies
// yet (NewRegistry without a Reload), a missing or invalid file is
// returned and nothing is watched; if it has, such a file is reported
// like any rejected reload (Options.OnReload, the observer, the log) and
// the policies in force keep serving.
//
// It watches directories, not the file, so it survives editors that save
// by writing a new file and renaming it over the old one: the directory of
// path, the directory of every symlink met on the way from path to the
// file (a release "current" link, the ..data link of a Kubernetes
// ConfigMap volume), and the directory of the file path resolves to (a
// file linked from a shared mount, edited in place). After each change it
// resolves path again, so when a link is re-pointed the new target's
// directory is watched and the old one dropped.
//
// Only events of the policy file, of the symlinks on the way to it and of
// the file it resolves to count; other files in those directories (a log,
// an editor's swap file) are ignored. Each counted event is followed by a
// reload after Debounce with no further counted event, and at most
// MaxDelay after the first event of a burst; a file whose content did not
// change is not applied again. An invalid file keeps the previous
// policies serving and is reported through Options.OnReload, the observer
// and the log; a later valid file is picked up. A watcher error (such as
// an event overflow, after which events were lost) is reported as such
// (errors.Is(err, ErrWatch), ReloadResult ResultWatchError; not counted as
// a rejected file) and followed by a reload from disk.
//
// A watched directory that is deleted or renamed takes its watch with it.
// Watch then reports a watch error matching ErrWatchLost, and every
// RetryInterval tries to watch the directory again, reporting each try
// that fails; once the watch is back it reloads from disk, so an edit
// made meanwhile is not lost. A policy file that is still missing a
// RetryInterval after its deletion (not a rename-on-save, whose new file
// comes at once) is reported as a rejected reload (os.ErrNotExist), every
// RetryInterval until it is back; the policies in force keep serving.
//
// A watch hook or reload callback that panics on the watch goroutine is
// recovered, reported (a hook's panic as a rejected reload, see
// Registry.Reload) and logged, and the watch goes on.
func (r *Registry) Watch(path string, opts WatchOptions) (*Watcher, error) {
	debounce := opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	maxDelay := opts.MaxDelay
	if maxDelay <= 0 {
		maxDelay = debounce * maxDelayFactor
		if debounce > math.MaxInt64/maxDelayFactor {
			maxDelay = math.MaxInt64
		}
	}
	maxDelay = max(maxDelay, debounce)
	retryEvery := opts.RetryInterval
	if retryEvery <= 0 {
		retryEvery = DefaultRetryInterval
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config: watch: %w", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	dir := filepath.Dir(path)
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("config: watch %s: %w", dir, err)
	}
	s := &watchState{w: fw, path: path, watched: map[string]bool{dir: true}}
	started := false
	defer func() {
		if !started {
			fw.Close() // a panicking callback in the first reload
		}
	}()
	s.follow()
	if err := r.reload(path); err != nil && r.Version() == "" {
		return nil, err
	}
	started = true
	wt := &Watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wt.done)
		defer fw.Close()
		r.watchLoop(s, wt.stop, debounce, maxDelay, retryEvery)
	}()
	return wt, nil
}

// watchState is what a watch follows: the directories watched and the
// names whose events count.
type watchState struct {
	w       *fsnotify.Watcher
	path    string
	watched map[string]bool // directories watched
	names   map[string]bool // the path, the links on the way, the file
	lost    []string        // directories wanted but not watched
}

// follow watches what path resolves to now, and only that, and records
// the directories it could not watch.
func (s *watchState) follow() {
	want, names := watchDirs(s.path)
	s.names, s.lost = names, s.lost[:0]
	for d := range want {
		if s.watched[d] {
			continue
		}
		if err := s.w.Add(d); err != nil {
			s.lost = append(s.lost, d)
			continue
		}
		s.watched[d] = true
	}
	for d := range s.watched {
		if !want[d] {
			s.w.Remove(d) // it may be gone already
			delete(s.watched, d)
		}
	}
	sort.Strings(s.lost)
}

// dropped handles an event of a watched directory itself: deleted or
// renamed, it no longer holds the watch (the kernel dropped it, or it
// follows the old inode), so it is forgotten, to be watched again by
// follow. It reports whether ev was such an event.
func (s *watchState) dropped(ev fsnotify.Event) bool {
	if !s.watched[ev.Name] || !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		return false
	}
	s.w.Remove(ev.Name) // it may be gone already
	delete(s.watched, ev.Name)
	return true
}

// watchLoop reloads the policy file after each debounced event until stop
// closes, and re-establishes lost watches.
func (r *Registry) watchLoop(s *watchState, stop <-chan struct{}, debounce, maxDelay, retryEvery time.Duration) {
	timer := clock.Real.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	retryTimer := clock.Real.NewTimer(time.Hour)
	retryTimer.Stop()
	defer retryTimer.Stop()
	var burst time.Time // the first event of the pending burst; zero: none
	arm := func() {
		now := clock.Real.Now()
		if burst.IsZero() {
			burst = now
		}
		d := debounce
		if left := maxDelay - now.Sub(burst); left < d {
			d = max(left, 0)
		}
		timer.Reset(d)
	}
	retrying := false
	retry := func() {
		if !retrying {
			retrying = true
			retryTimer.Reset(retryEvery)
		}
	}
	// check follows path, reports a lost watch, and reloads unless the
	// file is missing. missing says what to do then: report it, or wait
	// for the retry (a rename-on-save's new file comes at once).
	check := func(reportMissing bool) {
		s.follow()
		if len(s.lost) > 0 {
			lost := strings.Join(s.lost, ", ")
			r.safely(func() { r.watchError(fmt.Errorf("%s: %w", lost, ErrWatchLost)) })
			retry()
			return
		}
		if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
			if reportMissing {
				r.safely(func() { r.reload(s.path) }) // reports the missing file
			}
			retry()
			return
		}
		r.safely(func() { r.reload(s.path) }) // reports its own errors
	}
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-s.w.Events:
			if !ok {
				r.safely(func() { r.watchError(errWatcherClosed) })
				return
			}
			if s.dropped(ev) {
				arm()
				continue
			}
			if ev.Op == fsnotify.Chmod || !s.names[filepath.Clean(ev.Name)] {
				continue
			}
			arm()
		case err, ok := <-s.w.Errors:
			if !ok {
				r.safely(func() { r.watchError(errWatcherClosed) })
				return
			}
			r.safely(func() { r.watchError(err) })
			arm() // events may have been lost: read the file again
		case <-timer.C():
			burst = time.Time{}
			check(false)
		case <-retryTimer.C():
			retrying = false
			check(true)
		}
	}
}

// safely runs f on the watch goroutine, recovering a panic of a callback
// it calls (OnReload, a ReloadObserver; the watch hooks are recovered by
// apply itself) so that the watch, and the process, go on. The panic is
// logged at Error.
func (r *Registry) safely(f func()) {
	defer func() {
		if v := recover(); v != nil {
			r.logger().Error("config: a reload callback panicked on the watch goroutine; recovered, the watch goes on", "panic", v)
		}
	}()
	f()
}

// errWatcherClosed is reported (as a watch error) if fsnotify closes its
// channels while the watch runs; the watch then stops.
var errWatcherClosed = errors.New("watcher closed; reloads stopped")

// maxLinks bounds the symlinks followed while resolving a path, as the
// kernel does (ELOOP).
const maxLinks = 40

// watchDirs returns the directories whose changes can change what path
// reads: path's own directory, the directory holding each symlink met
// while resolving path, and the directory of the file it resolves to; and
// the names whose events count: path, each symlink met, and the file.
// path must be absolute. A path that does not resolve (a link being
// swapped) yields what was found so far.
func watchDirs(path string) (dirs, names map[string]bool) {
	dirs = map[string]bool{filepath.Dir(path): true}
	names = map[string]bool{filepath.Clean(path): true}
	vol := filepath.VolumeName(path)
	dest := vol + string(filepath.Separator) // the resolved prefix: no symlinks in it
	rest := path[len(vol):]                  // what is left to resolve
	links := 0
	for rest != "" {
		var comp string
		rest = strings.TrimLeft(rest, string(filepath.Separator))
		if i := strings.IndexRune(rest, filepath.Separator); i >= 0 {
			comp, rest = rest[:i], rest[i:]
		} else {
			comp, rest = rest, ""
		}
		switch comp {
		case "", ".":
			continue
		case "..":
			dest = filepath.Dir(dest)
			continue
		}
		next := filepath.Join(dest, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			if rest == "" { // the file itself is missing: watch for it
				dirs[dest] = true
				names[next] = true
			}
			return dirs, names
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			dest = next
			continue
		}
		if links++; links > maxLinks {
			return dirs, names
		}
		dirs[dest] = true // re-pointing the link changes this directory
		names[next] = true
		target, err := os.Readlink(next)
		if err != nil {
			return dirs, names
		}
		if filepath.IsAbs(target) {
			v := filepath.VolumeName(target)
			dest, target = v+string(filepath.Separator), target[len(v):]
		}
		rest = target + string(filepath.Separator) + rest
	}
	dirs[filepath.Dir(dest)] = true // in-place edits change this one
	names[dest] = true
	return dirs, names
}

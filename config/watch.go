package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stormguard/stormguard/clock"
)

// DefaultDebounce is how long Watch waits after the last file event before
// it reloads, so an editor's burst of writes is read once.
const DefaultDebounce = 100 * time.Millisecond

// WatchOptions tune Watch.
type WatchOptions struct {
	// Debounce delays a reload until events stop for this long.
	// 0: DefaultDebounce.
	Debounce time.Duration
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
// Every event is followed by a debounced reload; a file whose content did
// not change is not applied again. An invalid file keeps the previous
// policies serving and is reported through Options.OnReload, the observer
// and the log; a later valid file is picked up. A watcher error (such as
// an event overflow, after which events were lost) is reported as such
// (errors.Is(err, ErrWatch), ReloadResult ResultWatchError; not counted as
// a rejected file) and followed by a reload from disk.
func (r *Registry) Watch(path string, opts WatchOptions) (*Watcher, error) {
	debounce := opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config: watch: %w", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("config: watch %s: %w", dir, err)
	}
	watched := map[string]bool{dir: true}
	follow := func() { // watch what path resolves to now, and only that
		want := watchDirs(path)
		for d := range want {
			if !watched[d] && w.Add(d) == nil {
				watched[d] = true
			}
		}
		for d := range watched {
			if !want[d] {
				w.Remove(d) // it may be gone already
				delete(watched, d)
			}
		}
	}
	follow()
	if err := r.reload(path); err != nil && r.Version() == "" {
		w.Close()
		return nil, err
	}
	wt := &Watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wt.done)
		defer w.Close()
		r.watchLoop(w, wt.stop, path, debounce, follow)
	}()
	return wt, nil
}

// watchLoop reloads path after each debounced event until stop closes.
func (r *Registry) watchLoop(w *fsnotify.Watcher, stop <-chan struct{}, path string, debounce time.Duration, follow func()) {
	timer := clock.Real.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-w.Events:
			if !ok {
				r.safely(func() { r.watchError(errWatcherClosed) })
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				r.safely(func() { r.watchError(errWatcherClosed) })
				return
			}
			r.safely(func() { r.watchError(err) })
			timer.Reset(debounce) // events may have been lost: read the file again
		case <-timer.C():
			follow()
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue // mid-swap: the new file will raise another event
			}
			r.safely(func() { r.reload(path) }) // reports its own errors
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
// while resolving path, and the directory of the file it resolves to. path
// must be absolute. A path that does not resolve (a link being swapped)
// yields the directories found so far.
func watchDirs(path string) map[string]bool {
	dirs := map[string]bool{filepath.Dir(path): true}
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
			}
			return dirs
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			dest = next
			continue
		}
		if links++; links > maxLinks {
			return dirs
		}
		dirs[dest] = true // re-pointing the link changes this directory
		target, err := os.Readlink(next)
		if err != nil {
			return dirs
		}
		if filepath.IsAbs(target) {
			v := filepath.VolumeName(target)
			dest, target = v+string(filepath.Separator), target[len(v):]
		}
		rest = target + string(filepath.Separator) + rest
	}
	dirs[filepath.Dir(dest)] = true // in-place edits change this one
	return dirs
}

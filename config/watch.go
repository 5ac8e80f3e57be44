package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Watch applies the file at path now and again whenever it changes, until
// ctx ends; then it returns ctx's error. Run it in its own goroutine.
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
//
// The first load's error is returned at once if there is no previous
// policy set, so a process can refuse to start on a bad file.
func (r *Registry) Watch(ctx context.Context, path string, opts WatchOptions) error {
	debounce := opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch: %w", err)
	}
	defer w.Close()
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("config: watch %s: %w", dir, err)
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
	if err := r.Reload(path); err != nil && r.Version() == "" {
		return err
	}
	timer := clock.Real.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("config: watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("config: watcher closed")
			}
			r.watchError(err)
			timer.Reset(debounce) // events may have been lost: read the file again
		case <-timer.C():
			follow()
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue // mid-swap: the new file will raise another event
			}
			r.Reload(path) // reports its own errors
		}
	}
}

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

package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// It watches the file's directory, not the file, so it survives editors
// that save by writing a new file and renaming it over the old one, and
// Kubernetes ConfigMap volumes, where path is a symlink into a directory
// that is swapped atomically. Every event is followed by a debounced
// reload; a file whose content did not change is not applied again. An
// invalid file keeps the previous policies serving and is reported through
// Options.OnReload, the observer and the log; a later valid file is
// picked up.
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
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("config: watch %s: %w", dir, err)
	}
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
			r.report("", fmt.Errorf("config: watch: %w", err))
		case <-timer.C():
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue // mid-swap: the new file will raise another event
			}
			r.Reload(path) // reports its own errors
		}
	}
}

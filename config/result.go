package config

import "errors"

// The results of a reload, as ReloadResult names them: the label set of a
// reload counter such as stormguard_config_reloads_total{result}.
const (
	ResultSuccess    = "success"     // a file was applied
	ResultFailure    = "failure"     // a file was unreadable or refused; the old policies serve on
	ResultWatchError = "watch_error" // the file watcher failed (e.g. an event overflow); a reload from disk follows
)

// ErrWatch is matched (errors.Is) by the errors Watch reports when the
// file watcher itself fails, for example fsnotify.ErrEventOverflow (also
// matched). Such an error says nothing about the file: it is not counted
// as a rejected file, and Watch reloads from disk in case it missed a
// change.
var ErrWatch = errors.New("config: file watcher error")

// watchError is a watcher error as reported to OnReload and the observer.
type watchError struct{ err error }

func (e *watchError) Error() string   { return "config: file watcher error: " + e.err.Error() }
func (e *watchError) Unwrap() []error { return []error{ErrWatch, e.err} }

// ReloadResult lets a collector that does not import this package tell a
// watcher error apart: errors.As(err, &x), x of type
// interface{ ReloadResult() string }, finds it.
func (e *watchError) ReloadResult() string { return ResultWatchError }

// ReloadResult returns the result label of a reload report err:
// ResultSuccess (nil), ResultWatchError (errors.Is(err, ErrWatch)) or
// ResultFailure.
func ReloadResult(err error) string {
	switch {
	case err == nil:
		return ResultSuccess
	case errors.Is(err, ErrWatch):
		return ResultWatchError
	}
	return ResultFailure
}

// ErrHookPanic is matched (errors.Is) by the error reported when a watch
// hook (Options.OnBreaker, OnBudget, OnLimiter, or an observer's
// WatchBudget, WatchBreaker, WatchLimiter, WatchAdaptive or
// WatchAdaptives), Options.Classify or a SharedStore panicked while a
// file was being applied. Such a file is not applied: the old policies
// keep serving under the old version, and the reload is counted as
// rejected (ResultFailure).
var ErrHookPanic = errors.New("config: a watch hook panicked")

// ErrWatchLost is matched (errors.Is) by the watch error Watch reports
// while a directory it must watch cannot be watched (it was deleted,
// renamed away, or made again and not yet watched). It also matches
// ErrWatch (ResultWatchError). Watch tries again every
// WatchOptions.RetryInterval, reporting each failed try, and reloads from
// disk once the watch is back.
var ErrWatchLost = errors.New("config: a watched directory is gone")

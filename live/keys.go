package live

import "sync"

// keyTracker counts, per Idempotency-Key, how many times the server's
// handler executed a request carrying it, how many of those executions
// ran to completion (did the work: a side effect), and how many ran at
// once.
type keyTracker struct {
	mu   sync.Mutex
	keys map[string]*keyState

	keyless                    int64 // executions without a key
	dupExecs, dupDone          int64
	maxExecs, maxConc, maxDone int32
	concurrentKeys             int64 // keys that ever ran twice at once
}

type keyState struct {
	active, execs, done int32
	overlapped          bool
}

// begin records that an execution of key starts.
func (k *keyTracker) begin(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key == "" {
		k.keyless++
		return
	}
	if k.keys == nil {
		k.keys = make(map[string]*keyState)
	}
	st := k.keys[key]
	if st == nil {
		st = &keyState{}
		k.keys[key] = st
	}
	st.active++
	st.execs++
	if st.execs > 1 {
		k.dupExecs++
	}
	if st.active > 1 && !st.overlapped {
		st.overlapped = true
		k.concurrentKeys++
	}
	k.maxExecs = max(k.maxExecs, st.execs)
	k.maxConc = max(k.maxConc, st.active)
}

// end records that an execution of key ended; completed says whether it
// did its work rather than stopping because its caller gave up.
func (k *keyTracker) end(key string, completed bool) {
	if key == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.keys[key]
	st.active--
	if completed {
		st.done++
		if st.done > 1 {
			k.dupDone++
		}
		k.maxDone = max(k.maxDone, st.done)
	}
}

// Duplicates is what the server saw of requests carrying an
// Idempotency-Key.
type Duplicates struct {
	// Keys is the number of distinct keys the handler executed.
	Keys int64 `json:"keys"`
	// Executions of keyed requests by the handler; Keyless executions had
	// no key.
	Executions int64 `json:"executions"`
	Keyless    int64 `json:"keyless"`
	// DuplicateExecutions is Executions - Keys: executions beyond the first
	// of their key (retries and reissues that reached the handler).
	DuplicateExecutions int64 `json:"duplicate_executions"`
	// DuplicateCompletions counts completions beyond the first of their
	// key: the work done twice (an execution cut short because its caller
	// gave up does not complete).
	DuplicateCompletions int64 `json:"duplicate_completions"`
	// MaxExecutionsPerKey and MaxCompletionsPerKey are the most for one
	// key.
	MaxExecutionsPerKey  int `json:"max_executions_per_key"`
	MaxCompletionsPerKey int `json:"max_completions_per_key"`
	// MaxConcurrentPerKey is the most executions of one key running at
	// once; ConcurrentKeys counts the keys that ever ran twice at once.
	MaxConcurrentPerKey int   `json:"max_concurrent_per_key"`
	ConcurrentKeys      int64 `json:"concurrent_keys"`
}

// result returns the counts once the server has stopped.
func (k *keyTracker) result() Duplicates {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := Duplicates{
		Keys:                 int64(len(k.keys)),
		Keyless:              k.keyless,
		DuplicateExecutions:  k.dupExecs,
		DuplicateCompletions: k.dupDone,
		MaxExecutionsPerKey:  int(k.maxExecs),
		MaxCompletionsPerKey: int(k.maxDone),
		MaxConcurrentPerKey:  int(k.maxConc),
		ConcurrentKeys:       k.concurrentKeys,
	}
	d.Executions = d.Keys + d.DuplicateExecutions
	return d
}

package queue

import "container/heap"

// taskHeap orders waiting tasks by due time (then by submission order), for
// the Scheduler's dispatcher. It implements heap.Interface.
type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// push adds t and reports whether it became the earliest task.
func (h *taskHeap) push(t *task) bool {
	heap.Push(h, t)
	return (*h)[0] == t
}

// pop removes and returns the earliest task.
func (h *taskHeap) pop() *task { return heap.Pop(h).(*task) }

// taskFIFO is a queue of tasks that are due and wait for a worker.
type taskFIFO struct {
	items []*task
	head  int
}

func (f *taskFIFO) len() int { return len(f.items) - f.head }

func (f *taskFIFO) push(t *task) { f.items = append(f.items, t) }

func (f *taskFIFO) pop() *task {
	t := f.items[f.head]
	f.items[f.head] = nil
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head >= 64 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return t
}

// drain removes and returns every task.
func (f *taskFIFO) drain() []*task {
	out := append([]*task(nil), f.items[f.head:]...)
	clear(f.items)
	f.items, f.head = f.items[:0], 0
	return out
}

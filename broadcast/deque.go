package broadcast

// deque is a growable ring-buffer FIFO: a watcher's own queue, used only
// when it holds a prefix, a replay, or values moved out of the shared ring.
// Its zero value is empty and allocates nothing.
type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) len() int { return d.n }

func (d *deque[T]) push(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)%len(d.buf)] = v
	d.n++
}

func (d *deque[T]) grow() {
	nb := make([]T, max(2*len(d.buf), 16))
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque[T]) pop() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero // let the garbage collector have it
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return v
}

// removeAt removes the i-th value (0 is the front), shifting the shorter
// side: O(min(i, len-i)), so dropping the oldest value just past a short
// prefix is O(1) however long the deque (BenchmarkDropOldestFull).
func (d *deque[T]) removeAt(i int) {
	var zero T
	n := len(d.buf)
	if i < d.n/2 {
		for j := i; j > 0; j-- {
			d.buf[(d.head+j)%n] = d.buf[(d.head+j-1)%n]
		}
		d.buf[d.head] = zero
		d.head = (d.head + 1) % n
		d.n--
		return
	}
	for j := i; j < d.n-1; j++ {
		d.buf[(d.head+j)%n] = d.buf[(d.head+j+1)%n]
	}
	d.buf[(d.head+d.n-1)%n] = zero
	d.n--
}

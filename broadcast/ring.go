package broadcast

// Ring sizes. The shared ring only has to cover how far a watcher normally
// lags: one further behind gets its values moved into its own queue
// (spill). 1024 slots cover the default queue length of 1000; WithHistory
// makes it larger if it must.
const (
	minRing = 64
	maxRing = 1024
)

// ring is the broadcaster's shared buffer: the value with sequence number s
// is in buf[s&mask] until the publish of s+len(buf) overwrites it; written
// under the broadcaster's mutex, read under a watcher's (attend says why
// a slot is never overwritten while a reader copies it).
type ring[T any] struct {
	buf  []T
	mask uint64
}

func newRing[T any](size uint64) *ring[T] {
	return &ring[T]{buf: make([]T, size), mask: size - 1}
}

func (r *ring[T]) at(s uint64) T { return r.buf[s&r.mask] }

// appendTo appends the k values from sequence number h on to dst: one copy,
// or two where the segment wraps round the end of buf.
func (r *ring[T]) appendTo(dst []T, h, k uint64) []T {
	i := h & r.mask
	end := min(i+k, uint64(len(r.buf)))
	dst = append(dst, r.buf[i:end]...)
	return append(dst, r.buf[:k-(end-i)]...)
}

func (r *ring[T]) size() uint64 {
	if r == nil {
		return 0
	}
	return uint64(len(r.buf))
}

// ringSize is the ring size for a queue length q and a history of h values:
// a power of two, at least minRing, big enough for q+1 values up to maxRing
// and for h+1 values whatever their number.
func ringSize(q, h int) uint64 {
	want := uint64(minRing)
	for want < uint64(q)+1 && want < maxRing {
		want <<= 1
	}
	for want < uint64(h)+1 {
		want <<= 1
	}
	return want
}

// item is a value in a watcher's own queue, with its sequence number
// (0 for prefix values).
type item[T any] struct {
	seq uint64
	v   T
}

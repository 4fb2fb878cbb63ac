package broadcast

import (
	"slices"
	"testing"
)

// TestRingAppendTo checks the ring's batch copy at every start and length,
// those that wrap round the end of the buffer included.
func TestRingAppendTo(t *testing.T) {
	const size = 8
	r := newRing[uint64](size)
	for base := uint64(0); base < 3*size; base += 3 { // base%size != 0: segments wrap
		for s := base; s < base+size; s++ {
			r.buf[s&r.mask] = s // the ring as it is once s was committed
		}
		for h := base; h < base+size; h++ {
			for k := uint64(0); h+k <= base+size; k++ {
				got := r.appendTo([]uint64{42}, h, k)
				want := []uint64{42}
				for q := h; q < h+k; q++ {
					want = append(want, q)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("appendTo(h=%d, k=%d) = %v, want %v", h, k, got, want)
				}
			}
		}
	}
}

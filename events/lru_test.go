package events

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// modelLRU is the obvious LRU: a slice, most recent first.
type modelLRU struct {
	max  int
	keys []int
	vals map[int]int
}

func (m *modelLRU) touch(k int) (v *int, found bool) {
	if i := slices.Index(m.keys, k); i >= 0 {
		m.keys = slices.Insert(slices.Delete(m.keys, i, i+1), 0, k)
		x := m.vals[k]
		return &x, true
	}
	if len(m.keys) >= m.max {
		old := m.keys[len(m.keys)-1]
		m.keys = m.keys[:len(m.keys)-1]
		delete(m.vals, old)
	}
	m.keys = slices.Insert(m.keys, 0, k)
	x := 0
	return &x, false
}

// TestLRUAgainstModel drives the lru and the model with the same random
// touches, with hashes that collide on purpose (so the chains are used) and
// with distinct ones, and compares hits, values and contents.
func TestLRUAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(int) uint64
	}{
		{"distinct hashes", func(k int) uint64 { return uint64(k)*0x9e3779b97f4a7c15 + 1 }},
		{"four hashes", func(k int) uint64 { return uint64(k % 4) }},
		{"one hash", func(int) uint64 { return 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for _, size := range []int{1, 2, 3, 8, 50, 2500} {
				c := newLRU[int, int](size)
				m := &modelLRU{max: size, vals: map[int]int{}}
				for step := range 5000 {
					k := rng.IntN(size * 3)
					v, found := c.touch(k, tc.hash(k))
					mv, mfound := m.touch(k)
					if found != mfound {
						t.Fatalf("size %d, step %d, key %d: found %v, model %v", size, step, k, found, mfound)
					}
					if found && *v != *mv {
						t.Fatalf("size %d, step %d, key %d: value %d, model %d", size, step, k, *v, *mv)
					}
					if !found {
						*v = 0 // the caller resets a reused slot
					}
					*v += step
					m.vals[k] = *mv + step
					if c.len() != len(m.keys) {
						t.Fatalf("size %d, step %d: len %d, model %d", size, step, c.len(), len(m.keys))
					}
				}
				// Contents in recency order.
				var got []int
				for i := c.links[0].next; i != 0; i = c.links[i].next {
					got = append(got, c.entry(i).key)
				}
				if !slices.Equal(got, m.keys) {
					t.Fatalf("size %d: order %v, model %v", size, got, m.keys)
				}
				for _, k := range m.keys {
					if n := chainLen(c, k, tc.hash(k)); n != 1 {
						t.Fatalf("size %d: key %d found %d times in its chain", size, k, n)
					}
				}
			}
		})
	}
}

func chainLen(c *lru[int, int], k int, h uint64) int {
	n := 0
	for _, e := range c.index {
		if e.slot != 0 && c.entry(e.slot).key == k {
			if e.tag != uint32(h) || c.links[e.slot].hash != h {
				return -1
			}
			n++
		}
	}
	return n
}

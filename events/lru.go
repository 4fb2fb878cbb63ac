package events

import "math/bits"

// lru is a fixed-size least-recently-used map, not safe for concurrent use
// (the [Correlator]'s mutex guards it).
//
// It exists instead of hashicorp/golang-lru/v2 for the correlator's access
// pattern, "find the record for this key, or make one, then update it in
// place", on the correlator's encoded keys (see eventKeys):
//
//   - the caller hashes each key once, before taking its lock;
//   - the index is an open-addressing table of its own (linear probing,
//     at most half full, backward-shift deletion), 8 bytes per position:
//     a probe reads a 32-bit hash tag and a slot number from one array,
//     with none of a Go map's hashing, group metadata or tombstones, and it
//     holds no pointer for the garbage collector to scan;
//   - a lookup ([lookupBytes]) compares the caller's bytes in place, so a
//     key that is found costs no string; [lru.touch] is one lookup, and
//     once the cache is full the evicted slot is reused for the new key;
//   - entries live in slices indexed by int32, with the recency list in a
//     compact array of its own: moving an entry to the front touches 16-byte
//     links that stay in the processor's cache, not three scattered
//     entries.
//
// See DESIGN.md for the measurements. Recency is kept as in k8s.io/utils/lru
// (groupcache), which client-go's correlator uses: a lookup or an insert
// makes the key the most recent; inserting into a full cache evicts the
// least recent key.
type lru[K comparable, V any] struct {
	max int
	// index maps a hash to its slot: position p holds a slot whose hash's
	// low bits are p or come before it on the probe sequence, with no empty
	// position in between. Its length is a power of two, at least twice
	// the number of slots.
	index []lruPos
	// Slot 0 of links is the sentinel of a circular list: links[0].next is
	// the most recently used slot, links[0].prev the least. Slots 1… hold
	// entries; keys and vals are indexed alike.
	links []lruLink
	keys  []K
	vals  []V
}

// lruPos is one position of the index: slot 0 means empty.
type lruPos struct {
	tag  uint32 // the low 32 bits of the slot's hash
	slot int32
}

type lruLink struct {
	prev, next int32
	hash       uint64
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	n := min(max, 1024) + 1
	return &lru[K, V]{
		max:   max,
		index: make([]lruPos, indexLen(n)),
		links: make([]lruLink, 1, n),
		keys:  make([]K, 1, n),
		vals:  make([]V, 1, n),
	}
}

// indexLen is the index length for n slots: a power of two ≥ 2n.
func indexLen(n int) int { return 1 << bits.Len(uint(2*n-1)) }

// touch returns the value stored for k, whose hash is h, and makes k the
// most recent key. When k is absent it is inserted, found is false, and *v
// holds whatever the reused slot held (the zero value for a fresh one): the
// caller resets it, and may reuse its allocations. v is valid until the next
// call.
func (c *lru[K, V]) touch(k K, h uint64) (v *V, found bool) {
	mask := uint32(len(c.index) - 1)
	for p := uint32(h) & mask; ; p = (p + 1) & mask {
		e := c.index[p]
		if e.slot == 0 {
			break
		}
		if e.tag == uint32(h) && c.keys[e.slot] == k {
			c.moveToFront(e.slot)
			return &c.vals[e.slot], true
		}
	}
	return &c.vals[c.insert(k, h)], false
}

// lookupBytes finds the key equal to string(k), whose hash is h, makes it
// the most recent key and returns its slot; 0 if it is absent. k is
// compared in place, never converted to a string, so a key that is found
// costs no allocation.
func lookupBytes[V any](c *lru[string, V], k []byte, h uint64) int32 {
	mask := uint32(len(c.index) - 1)
	for p := uint32(h) & mask; ; p = (p + 1) & mask {
		e := c.index[p]
		if e.slot == 0 {
			return 0
		}
		if e.tag == uint32(h) && c.keys[e.slot] == string(k) {
			c.moveToFront(e.slot)
			return e.slot
		}
	}
}

// insert stores k, which is absent, as the most recent key, evicting the
// least recent one if the cache is full, and returns its slot. vals[slot]
// holds whatever the reused slot held.
func (c *lru[K, V]) insert(k K, h uint64) int32 {
	var i int32
	if c.len() >= c.max {
		i = c.links[0].prev // the least recently used
		c.unlink(i)
		c.unindex(i)
	} else {
		i = int32(len(c.links))
		if len(c.links) == cap(c.links) {
			c.growSlots()
		}
		c.links = append(c.links, lruLink{hash: h})
		c.keys = append(c.keys, k)
		var zero V
		c.vals = append(c.vals, zero)
		if 2*len(c.links) > len(c.index) {
			c.grow() // places i too
			c.pushFront(i)
			return i
		}
	}
	c.keys[i] = k
	c.links[i].hash = h
	c.place(i, h)
	c.pushFront(i)
	return i
}

// place puts slot i, whose hash is h, at the first empty position of h's
// probe sequence.
func (c *lru[K, V]) place(i int32, h uint64) {
	mask := uint32(len(c.index) - 1)
	p := uint32(h) & mask
	for c.index[p].slot != 0 {
		p = (p + 1) & mask
	}
	c.index[p] = lruPos{tag: uint32(h), slot: i}
}

// growSlots doubles the room for slots, up to max: append would grow them
// by a quarter at a time, and a fresh correlator's caches, filling up to
// 4096 entries, would copy them five times instead of twice (measured in
// DESIGN.md).
func (c *lru[K, V]) growSlots() {
	n := min(2*cap(c.links), c.max+1)
	c.links = append(make([]lruLink, 0, n), c.links...)
	c.keys = append(make([]K, 0, n), c.keys...)
	c.vals = append(make([]V, 0, n), c.vals...)
}

// grow doubles the index and places every slot again.
func (c *lru[K, V]) grow() {
	c.index = make([]lruPos, 2*len(c.index))
	for i := 1; i < len(c.links); i++ {
		c.place(int32(i), c.links[i].hash)
	}
}

// len returns the number of keys held.
func (c *lru[K, V]) len() int { return len(c.links) - 1 }

// unindex removes slot i from the index, shifting back the positions after
// it that would otherwise be cut off from their probe sequence's start.
func (c *lru[K, V]) unindex(i int32) {
	mask := uint32(len(c.index) - 1)
	p := uint32(c.links[i].hash) & mask
	for c.index[p].slot != i {
		p = (p + 1) & mask
	}
	for q := p; ; {
		c.index[p] = lruPos{}
		for {
			q = (q + 1) & mask
			e := c.index[q]
			if e.slot == 0 {
				return
			}
			// e may fill p if p lies on e's probe sequence before q: its
			// distance from e's home is at least p's.
			if home := e.tag & mask; (q-home)&mask >= (q-p)&mask {
				c.index[p] = e
				p = q
				break
			}
		}
	}
}

func (c *lru[K, V]) moveToFront(i int32) {
	if c.links[0].next == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

func (c *lru[K, V]) unlink(i int32) {
	l := c.links[i]
	c.links[l.prev].next = l.next
	c.links[l.next].prev = l.prev
}

func (c *lru[K, V]) pushFront(i int32) {
	first := c.links[0].next
	c.links[i].prev, c.links[i].next = 0, first
	c.links[first].prev = i
	c.links[0].next = i
}

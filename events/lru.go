package events

// lru is a fixed-size least-recently-used map, not safe for concurrent use
// (the [Correlator]'s mutex guards it).
//
// It exists instead of hashicorp/golang-lru/v2 for the correlator's access
// pattern, "find the record for this key, or make one, then update it in
// place", on the correlator's encoded keys (see eventKeys):
//
//   - the caller hashes each key once, before taking its lock, and the
//     map is keyed by that hash, with a chain for the rare collision;
//   - a lookup ([lookupBytes]) compares the caller's bytes in place, so a
//     key that is found costs no string; [lru.touch] is one lookup, and
//     once the cache is full the evicted slot is reused for the new key;
//   - entries live in slices indexed by int32, with the recency list in a
//     compact array of its own: moving an entry to the front touches 24-byte
//     links that stay in the processor's cache, not three scattered
//     entries.
//
// See DESIGN.md for the measurements. Recency is kept as in k8s.io/utils/lru
// (groupcache), which client-go's correlator uses: a lookup or an insert
// makes the key the most recent; inserting into a full cache evicts the
// least recent key.
type lru[K comparable, V any] struct {
	max   int
	index map[uint64]int32 // hash → first slot with that hash
	// Slot 0 of links is the sentinel of a circular list: links[0].next is
	// the most recently used slot, links[0].prev the least. Slots 1… hold
	// entries; keys and vals are indexed alike.
	links []lruLink
	keys  []K
	vals  []V
}

type lruLink struct {
	prev, next int32
	chain      int32 // next slot with the same hash, 0 for none
	hash       uint64
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	n := min(max, 1024) + 1
	return &lru[K, V]{
		max:   max,
		index: make(map[uint64]int32, n),
		links: make([]lruLink, 1, n),
		keys:  make([]K, 1, n),
		vals:  make([]V, 1, n),
	}
}

// touch returns the value stored for k, whose hash is h, and makes k the
// most recent key. When k is absent it is inserted, found is false, and *v
// holds whatever the reused slot held (the zero value for a fresh one): the
// caller resets it, and may reuse its allocations. v is valid until the next
// call.
func (c *lru[K, V]) touch(k K, h uint64) (v *V, found bool) {
	for i := c.index[h]; i != 0; i = c.links[i].chain {
		if c.keys[i] == k {
			c.moveToFront(i)
			return &c.vals[i], true
		}
	}
	return &c.vals[c.insert(k, h)], false
}

// lookupBytes finds the key equal to string(k), whose hash is h, makes it
// the most recent key and returns its slot; 0 if it is absent. k is
// compared in place, never converted to a string, so a key that is found
// costs no allocation.
func lookupBytes[V any](c *lru[string, V], k []byte, h uint64) int32 {
	for i := c.index[h]; i != 0; i = c.links[i].chain {
		if c.keys[i] == string(k) {
			c.moveToFront(i)
			return i
		}
	}
	return 0
}

// insert stores k, which is absent, as the most recent key, evicting the
// least recent one if the cache is full, and returns its slot. vals[slot]
// holds whatever the reused slot held.
func (c *lru[K, V]) insert(k K, h uint64) int32 {
	head := c.index[h]
	var i int32
	if c.len() >= c.max {
		i = c.links[0].prev // the least recently used
		c.unlink(i)
		c.unchain(i)
		if c.links[i].hash == h {
			head = c.index[h] // unchain may have changed it
		}
	} else {
		i = int32(len(c.links))
		c.links = append(c.links, lruLink{})
		c.keys = append(c.keys, k)
		var zero V
		c.vals = append(c.vals, zero)
	}
	c.keys[i] = k
	c.links[i].hash, c.links[i].chain = h, head
	c.index[h] = i
	c.pushFront(i)
	return i
}

// len returns the number of keys held.
func (c *lru[K, V]) len() int { return len(c.links) - 1 }

// unchain removes slot i from the index.
func (c *lru[K, V]) unchain(i int32) {
	l := &c.links[i]
	p := c.index[l.hash]
	if p == i {
		if l.chain == 0 {
			delete(c.index, l.hash)
		} else {
			c.index[l.hash] = l.chain
		}
		return
	}
	for c.links[p].chain != i {
		p = c.links[p].chain
	}
	c.links[p].chain = l.chain
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

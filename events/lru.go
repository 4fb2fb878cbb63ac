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
//   - entries live in slots numbered by int32, the recency list in a
//     compact array of its own (moving an entry to the front touches
//     24-byte links that stay in the processor's cache, not three
//     scattered entries), keys and values in chunks that never move.
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
	// links[0] is the sentinel of a circular list: its next is the most
	// recently used slot, its prev the least. Slots 1… hold entries. links
	// holds no pointer, so growing it is a plain copy, and the recency list
	// stays in an array of its own: moving an entry to the front touches
	// 24-byte links that stay in the processor's cache.
	links []lruLink
	// chunks hold the slots' keys and values, lruChunk at a time (the last
	// one shorter if max+1 is not a multiple): a cache that grows
	// allocates one more chunk and copies nothing, where doubling one
	// slice copied every entry, pointers and all, with the garbage
	// collector's write barriers (DESIGN.md, round 4). Slots never move,
	// so a pointer to a value stays valid until the slot is reused.
	chunks [][]lruEntry[K, V]
}

// lruChunk is the number of slots in a chunk (a power of two).
const (
	lruChunkBits = 8
	lruChunk     = 1 << lruChunkBits
)

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

// lruPos is one position of the index: slot 0 means empty.
type lruPos struct {
	tag  uint32 // the low 32 bits of the slot's hash
	slot int32
}

type lruLink struct {
	prev, next int32
	// gen counts the keys the slot has held: a reference to the slot made
	// with its gen still names the same key while gen is unchanged (see
	// logRecord's links).
	gen  uint32
	hash uint64
}

// initialSlots is the room a new cache has before it grows; maxSlots the
// most keys a cache holds, whatever LRUCacheSize says (slot numbers and
// the index's positions are 32-bit).
const (
	initialSlots = 1024
	maxSlots     = 1<<30 - 1
)

func newLRU[K comparable, V any](max int) *lru[K, V] {
	// Slots are int32: a larger max (math.MaxInt, say) would not fit in
	// memory anyway, and means no limit.
	max = min(max, maxSlots)
	n := min(max, initialSlots) + 1
	c := &lru[K, V]{max: max, index: make([]lruPos, indexLen(n)), links: make([]lruLink, 1, n)}
	for c.slots() < n {
		c.addChunk()
	}
	return c
}

// slots returns the number of slots the chunks have, the sentinel's
// included.
func (c *lru[K, V]) slots() int {
	if len(c.chunks) == 0 {
		return 0
	}
	return (len(c.chunks)-1)*lruChunk + len(c.chunks[len(c.chunks)-1])
}

// addChunk allocates the next chunk of slots, no more than max+1 in all.
func (c *lru[K, V]) addChunk() {
	n := lruChunk
	if left := c.max - c.slots(); left < lruChunk-1 { // max+1 might overflow
		n = left + 1
	}
	c.chunks = append(c.chunks, make([]lruEntry[K, V], n))
}

// entry returns slot i's key and value.
func (c *lru[K, V]) entry(i int32) *lruEntry[K, V] {
	return &c.chunks[i>>lruChunkBits][i&(lruChunk-1)]
}

// val returns the value in slot i.
func (c *lru[K, V]) val(i int32) *V { return &c.entry(i).val }

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
		if e.tag == uint32(h) && c.entry(e.slot).key == k {
			c.moveToFront(e.slot)
			return c.val(e.slot), true
		}
	}
	return c.val(c.insert(k, h)), false
}

// lookupBytes finds the key equal to string(k), whose hash is h, makes it
// the most recent key and returns its slot; 0 if it is absent. k is
// compared in place, never converted to a string, so a key that is found
// costs no allocation.
func lookupBytes[V any](c *lru[string, V], k []byte, h uint64) int32 {
	i := findBytes(c, k, h)
	if i != 0 {
		c.moveToFront(i)
	}
	return i
}

// findBytes is lookupBytes without making the key the most recent.
func findBytes[V any](c *lru[string, V], k []byte, h uint64) int32 {
	mask := uint32(len(c.index) - 1)
	for p := uint32(h) & mask; ; p = (p + 1) & mask {
		e := c.index[p]
		if e.slot == 0 {
			return 0
		}
		if e.tag == uint32(h) && c.entry(e.slot).key == string(k) {
			return e.slot
		}
	}
}

// insert stores k, which is absent, as the most recent key, evicting the
// least recent one if the cache is full, and returns its slot. Its value
// holds whatever the reused slot held.
func (c *lru[K, V]) insert(k K, h uint64) int32 {
	var i int32
	if c.len() >= c.max {
		i = c.links[0].prev // the least recently used
		c.unlink(i)
		c.unindex(i)
	} else {
		i = int32(len(c.links))
		if int(i) == c.slots() {
			c.addChunk()
		}
		if len(c.links) == cap(c.links) {
			// Doubling (append would grow by a quarter at a time here).
			c.links = append(make([]lruLink, 0, min(2*cap(c.links), c.max)+1), c.links...)
		}
		c.links = append(c.links, lruLink{})
		if 2*len(c.links) > len(c.index) {
			c.grow()
		}
	}
	c.entry(i).key = k
	l := &c.links[i]
	l.hash = h
	l.gen++
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

// grow doubles the index and places every slot but the newest, which
// insert places, again.
func (c *lru[K, V]) grow() {
	c.index = make([]lruPos, 2*len(c.index))
	for i := int32(1); i < int32(len(c.links)-1); i++ {
		c.place(i, c.links[i].hash)
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

// moveToFront makes slot i the most recent. It is unlink and pushFront
// written out on one local slice: calling them, each reloading c.links,
// cost 70 more instructions per correlated event (three calls per event;
// cachegrind, DESIGN.md round 4).
func (c *lru[K, V]) moveToFront(i int32) {
	links := c.links
	if links[0].next == i {
		return
	}
	l := &links[i]
	links[l.prev].next = l.next
	links[l.next].prev = l.prev
	first := links[0].next
	l.prev, l.next = 0, first
	links[first].prev = i
	links[0].next = i
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

package natsbridge

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrLoop is returned (wrapped) by [Out], [In], [OutStream] and [InStream]
// when the new link and an existing one of the other direction would join
// one broadcaster to one subject both ways: every value published on the
// broadcaster would come back from NATS and be published on it again,
// forever. The existing link keeps working; [Link.Close] frees the pair.
// Use two broadcasters, an outbox and an inbox (see the package
// documentation and [NewNode]).
var ErrLoop = errors.New("natsbridge: an outgoing and an incoming link on one broadcaster and subject would feed each other")

type direction uint8

const (
	dirOut direction = iota // Out, OutStream: b -> subject
	dirIn                   // In, InStream: subject -> b
)

func (d direction) String() string {
	if d == dirOut {
		return "outgoing"
	}
	return "incoming"
}

type regEntry struct {
	id      uint64
	subject string
	dir     direction
}

// registry knows every live link of the process by broadcaster, so that
// the second link of a loop is refused. A broadcaster pointer is the key:
// links on different broadcasters never loop through this process.
var registry struct {
	mu     sync.Mutex
	nextID uint64
	links  map[any][]regEntry // guarded by mu
}

// register records a link of direction dir between broadcaster b (a
// *broadcast.Broadcaster[T]) and subject, unless a link of the other
// direction on b has a subject that overlaps it (equal, or one a wildcard
// that matches the other). It returns the function that forgets the link.
func register(b any, subject string, dir direction) (func(), error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for _, e := range registry.links[b] {
		if e.dir != dir && subjectsOverlap(e.subject, subject) {
			return nil, fmt.Errorf("%w: an %s link on subject %q exists for this broadcaster (new %s link on %q)",
				ErrLoop, e.dir, e.subject, dir, subject)
		}
	}
	if registry.links == nil {
		registry.links = make(map[any][]regEntry)
	}
	registry.nextID++
	id := registry.nextID
	registry.links[b] = append(registry.links[b], regEntry{id: id, subject: subject, dir: dir})
	var once sync.Once
	return func() {
		once.Do(func() {
			registry.mu.Lock()
			defer registry.mu.Unlock()
			list := registry.links[b]
			for i, e := range list {
				if e.id == id {
					list = append(list[:i], list[i+1:]...)
					break
				}
			}
			if len(list) == 0 {
				delete(registry.links, b)
			} else {
				registry.links[b] = list
			}
		})
	}, nil
}

// subjectsOverlap reports whether some literal subject matches both
// patterns (NATS wildcards: "*" one token, ">" one or more trailing tokens).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) && i == len(bt):
			return true
		case i < len(at) && at[i] == ">":
			return i < len(bt)
		case i < len(bt) && bt[i] == ">":
			return i < len(at)
		case i == len(at) || i == len(bt):
			return false
		case at[i] == "*" || bt[i] == "*" || at[i] == bt[i]:
			continue
		default:
			return false
		}
	}
}

// subjectMatches reports whether the literal subject s is matched by pattern.
func subjectMatches(pattern, s string) bool {
	return subjectsOverlap(pattern, s)
}

// validSubject reports whether s is a well-formed NATS subject; literal
// also requires no wildcards (a subject to publish to).
func validSubject(s string, literal bool) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" {
			return false
		}
		if t == "*" || t == ">" {
			if literal || (t == ">" && i != len(toks)-1) {
				return false
			}
		}
	}
	return true
}

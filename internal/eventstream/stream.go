package eventstream

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/heraldgo/herald/events"
)

// StreamObjects is the number of distinct objects in a [MixedStream].
const StreamObjects = 1000

// StreamStart is the timestamp of a [MixedStream]'s first event; each next
// event is StreamStep later.
var StreamStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// StreamStep is the time between two events of a [MixedStream].
const StreamStep = time.Millisecond

// MixedStream returns n events as Recorders would make them, the same for the
// same (n, seed), for benchmarks that compare correlators on one workload
// (herald's in-package benchmarks and the client-go comparison in bench/
// both use it):
//
//   - 1000 objects (Pods, Deployments, ReplicaSets, Nodes) in 20
//     namespaces, each reported by one source (kubelet on one of 50 hosts,
//     the scheduler, or a controller); half the events are about a hot set
//     of 100 objects;
//   - per kind, a few reasons, Normal and Warning, each with 1 to 15
//     message variants, so that some groups reach 10 distinct messages and
//     aggregate and others never do;
//   - 83% of the events repeat one of the last 64 events exactly (new
//     name and timestamps), to exercise de-duplication and the spam
//     filter, as in a cluster where a few failing objects report again
//     and again ([MixedStreamRepeating] takes another share).
//
// Event i is stamped StreamStart + i×StreamStep, with Count 1, the object's
// namespace (or "default"), and ReportingController/Instance set from
// Source. Message strings are shared between events, so replaying a stream
// allocates nothing for them.
// A negative n panics.
func MixedStream(n int, seed uint64) []events.Event {
	if n < 0 {
		panic(fmt.Sprintf("eventstream: MixedStream: n must not be negative, got %d", n))
	}
	return mixedStream(n, seed, streamRepeats)
}

// MixedStreamRepeating is [MixedStream] with a share repeats (0 to 1) of
// exact repeats instead of the default.
func MixedStreamRepeating(n int, seed uint64, repeats float64) []events.Event {
	if n < 0 {
		panic(fmt.Sprintf("eventstream: MixedStreamRepeating: n must not be negative, got %d", n))
	}
	if !(repeats >= 0 && repeats <= 1) {
		panic(fmt.Sprintf("eventstream: MixedStreamRepeating: repeats must be between 0 and 1, got %v", repeats))
	}
	return mixedStream(n, seed, repeats)
}

// streamRepeats is MixedStream's share of exact repeats: the share at
// which client-go v0.37.2's EventCorrelator makes 207 allocations per event
// on the stream, as it does on the stream of the published client-go
// figures herald is compared with (bench/eventsbench checks it).
const streamRepeats = 0.83

func mixedStream(n int, seed uint64, repeats float64) []events.Event {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	objs := streamObjects()
	out := make([]events.Event, 0, n)
	var recent [64]int // indexes into out
	for i := range n {
		t := StreamStart.Add(time.Duration(i) * StreamStep)
		var e events.Event
		if i > 0 && rng.Float64() < repeats {
			e = out[recent[rng.IntN(min(i, len(recent)))]]
		} else {
			var o *streamObject
			if rng.IntN(2) == 0 {
				o = &objs[rng.IntN(100)]
			} else {
				o = &objs[rng.IntN(len(objs))]
			}
			r := &o.reasons[rng.IntN(len(o.reasons))]
			e = events.Event{
				InvolvedObject:      o.ref,
				Namespace:           o.namespace,
				Reason:              r.reason,
				Type:                r.typ,
				Message:             r.messages[rng.IntN(len(r.messages))],
				Source:              o.source,
				ReportingController: o.source.Component,
				ReportingInstance:   o.source.Host,
			}
		}
		e.Name = e.InvolvedObject.Name + "." + strconv.FormatInt(t.UnixNano(), 16)
		e.FirstTimestamp, e.LastTimestamp, e.Count = t, t, 1
		recent[i%len(recent)] = len(out)
		out = append(out, e)
	}
	return out
}

type streamReason struct {
	typ, reason string
	messages    []string
}

type streamObject struct {
	ref       events.ObjectReference
	namespace string
	source    events.Source
	reasons   []streamReason
}

func variants(n int, format string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf(format, i)
	}
	return s
}

func streamObjects() []streamObject {
	podReasons := []streamReason{
		{events.Normal, "Scheduled", variants(1, "Successfully assigned pod to node%.0d")},
		{events.Normal, "Pulling", variants(3, "Pulling image \"registry.example/app:v%d\"")},
		{events.Normal, "Started", variants(1, "Started container app%.0d")},
		{events.Warning, "BackOff", variants(12, "Back-off restarting failed container app-%d")},
		{events.Warning, "Unhealthy", variants(15, "Readiness probe failed: HTTP probe failed with statuscode: 5%02d")},
	}
	workloadReasons := []streamReason{
		{events.Normal, "ScalingReplicaSet", variants(6, "Scaled up replica set app to %d")},
		{events.Warning, "FailedCreate", variants(11, "Error creating: pods \"app-%d\" is forbidden: exceeded quota")},
	}
	nodeReasons := []streamReason{
		{events.Normal, "NodeReady", variants(1, "Node status is now: NodeReady%.0d")},
		{events.Warning, "NodeNotReady", variants(2, "Node status is now: NodeNotReady (%d)")},
		{events.Warning, "EvictionThresholdMet", variants(10, "Attempting to reclaim ephemeral-storage (%d)")},
	}
	objs := make([]streamObject, StreamObjects)
	for i := range objs {
		o := &objs[i]
		ns := fmt.Sprintf("ns-%02d", i%20)
		switch i % 10 {
		case 7:
			o.ref = events.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: fmt.Sprintf("deploy-%04d", i)}
			o.source = events.Source{Component: "deployment-controller"}
			o.reasons = workloadReasons
		case 8:
			o.ref = events.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Name: fmt.Sprintf("rs-%04d", i)}
			o.source = events.Source{Component: "replicaset-controller"}
			o.reasons = workloadReasons
		case 9:
			o.ref = events.ObjectReference{Kind: "Node", APIVersion: "v1", Name: fmt.Sprintf("node-%04d", i)}
			o.source = events.Source{Component: "kubelet", Host: fmt.Sprintf("node-%04d", i)}
			o.reasons = nodeReasons
			ns = ""
		default:
			o.ref = events.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: fmt.Sprintf("app-%04d", i), FieldPath: "spec.containers{app}"}
			o.source = events.Source{Component: "kubelet", Host: fmt.Sprintf("node-%02d", i%50)}
			o.reasons = podReasons
		}
		o.ref.Namespace = ns
		o.ref.UID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		o.ref.ResourceVersion = strconv.Itoa(1000 + i)
		o.namespace = ns
		if ns == "" {
			o.namespace = "default"
		}
	}
	return objs
}

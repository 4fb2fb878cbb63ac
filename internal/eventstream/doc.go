// Package eventstream generates streams of events for benchmarks and load
// tests: [MixedStream], the workload on which herald's events pipeline is
// compared with client-go's (bench/eventsbench) and measured in package
// events' own benchmarks. It is internal to the herald repository; the bench
// module, whose import path is under herald's, imports it too.
package eventstream

//go:build unix

package main

import "syscall"

// usage returns the CPU time this process has used so far, user and
// system, in nanoseconds, and how many times its threads gave up the
// processor to wait (voluntary context switches: a thread with nothing to
// run parks in the kernel; waking it again costs a system call).
func usage() (cpuNS, waits int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), int64(ru.Nvcsw)
}

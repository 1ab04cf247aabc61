package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// pinOffCPU keeps the harness, and so every process it starts, off cpu:
// it runs itself again under taskset on the host's other CPUs (once: the
// environment marks the second run). A redis-server started on cpu alone
// (startRedis) then has that core to itself, as on a host that gives
// Redis a core of its own.
func pinOffCPU(cpu int) error {
	const pinned = "LIMITER_HARNESS_OFF_CPU"
	if os.Getenv(pinned) != "" {
		return nil
	}
	n := runtime.NumCPU()
	if n < 2 || cpu >= n {
		return fmt.Errorf("-redis-cpu %d: the harness may use %d CPUs, and needs one besides Redis's", cpu, n)
	}
	others := make([]string, 0, n-1)
	for c := range n {
		if c != cpu {
			others = append(others, strconv.Itoa(c))
		}
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{"taskset", "-c", strings.Join(others, ","), self}, os.Args[1:]...)
	return syscall.Exec(taskset, args, append(os.Environ(), pinned+"=1"))
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// busySeconds is the CPU time all processes of the machine have used
// since boot, summed over its cores, from /proc/stat.
func busySeconds() (float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseBusy(f)
}

// errBadProcStat is what parseBusy returns for text without a usable
// "cpu" line.
var errBadProcStat = errors.New("no cpu line in /proc/stat")

// parseBusy reads the machine-wide "cpu" line of /proc/stat (user, nice,
// system, idle, iowait, irq, softirq, steal, in USER_HZ ticks) and
// returns the time that was not idle or waiting, in seconds. Steal is
// counted as busy: time the host gave to someone else is time the
// measured processes could not have.
func parseBusy(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 || string(f[0]) != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, fmt.Errorf("%w: %q", errBadProcStat, sc.Text())
		}
		var busy uint64
		for i, v := range f[1:9] {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: %q", errBadProcStat, sc.Text())
			}
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		const ticksPerSecond = 100 // USER_HZ on Linux
		return float64(busy) / ticksPerSecond, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errBadProcStat
}

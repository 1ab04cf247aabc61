package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

// tcpTimeWait is the state number of TIME_WAIT in /proc/net/tcp.
const tcpTimeWait = 0x06

// timeWaitCount counts the IPv4 sockets in TIME_WAIT with either end on
// port: connections to or from it closed in the last minute.
func timeWaitCount(port int) (int, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return countTimeWait(f, port)
}

// errBadTCPTable is what countTimeWait returns for a line that is not
// one of /proc/net/tcp's.
var errBadTCPTable = errors.New("unreadable /proc/net/tcp line")

// countTimeWait reads a /proc/net/tcp table ("sl local_address
// rem_address st ...", addresses as hex ADDR:PORT, the state in hex) and
// counts the TIME_WAIT sockets with either end on port.
func countTimeWait(r io.Reader, port int) (int, error) {
	sc := bufio.NewScanner(r)
	n := 0
	for first := true; sc.Scan(); first = false {
		if first {
			continue // the column names
		}
		f := bytes.Fields(sc.Bytes())
		if len(f) < 4 {
			return 0, fmt.Errorf("%w: %q", errBadTCPTable, sc.Text())
		}
		state, err := strconv.ParseUint(string(f[3]), 16, 8)
		if err != nil {
			return 0, fmt.Errorf("%w: state %q", errBadTCPTable, f[3])
		}
		local, err := hexPort(f[1])
		if err != nil {
			return 0, err
		}
		remote, err := hexPort(f[2])
		if err != nil {
			return 0, err
		}
		if state == tcpTimeWait && (local == port || remote == port) {
			n++
		}
	}
	return n, sc.Err()
}

// hexPort reads the port of a /proc/net/tcp address, "0100007F:1F90".
func hexPort(addr []byte) (int, error) {
	i := bytes.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("%w: address %q", errBadTCPTable, addr)
	}
	p, err := strconv.ParseUint(string(addr[i+1:]), 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%w: address %q", errBadTCPTable, addr)
	}
	return int(p), nil
}

// portOf is the port of a host:port address.
func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

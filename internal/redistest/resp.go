package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Do sends one command to the Redis at addr on a fresh connection and
// returns its reply as text: a status or bulk string as is, an integer in
// decimal, an array as its elements joined by newlines. It needs no client
// library, so setting servers up never depends on the code under test.
func Do(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	return roundTrip(conn, args)
}

// roundTrip sends one command on conn, reads its reply as Do describes,
// and closes conn.
func roundTrip(conn net.Conn, args []string) (string, error) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err // a nil bulk reads as ""
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", err
		}
		items := make([]string, 0, max(n, 0))
		for range n {
			s, err := readReply(r)
			if err != nil {
				return "", err
			}
			items = append(items, s)
		}
		return strings.Join(items, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

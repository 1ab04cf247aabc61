package main

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"time"
)

// startRedis runs a private redis-server on a free loopback port.
func startRedis(dir string) (string, func(), error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "", nil, errors.New("redis-server not found")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	ln.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, errors.New("redis-server did not start")
}

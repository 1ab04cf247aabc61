//go:build !linux

package redistest

import "syscall"

// procAttr has no parent-death signal outside Linux: Main stops servers.
func procAttr() *syscall.SysProcAttr { return nil }

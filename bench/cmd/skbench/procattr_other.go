//go:build !linux

package main

import "syscall"

// childAttr is nil off Linux: children are stopped by the deferred stops and the signal
// handler only.
func childAttr() *syscall.SysProcAttr { return nil }

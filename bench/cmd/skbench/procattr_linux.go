package main

import "syscall"

// childAttr makes the kernel SIGKILL a child when the benchmark process dies, however it dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

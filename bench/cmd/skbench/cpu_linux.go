package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux platform Go
// supports.
const clockTicks = 100

// processCPU is the CPU time (user + system) process pid has used so far.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesised command name, which may contain spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// selfCPU is the CPU time this process (the load generator) has used so far.
func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// machineCPU is the CPU time all CPUs of the machine have spent so far, the part of it spent
// idle (idle and iowait), and the part the hypervisor gave to other guests (steal), from
// /proc/stat. Steal is time this machine wanted a CPU and did not get one: on a shared host it
// moves every figure from one run to the next.
func machineCPU() (machineTime, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTime{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return machineTime{}, false
	}
	var m machineTime
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return machineTime{}, false
		}
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		d := time.Duration(n) * time.Second / clockTicks
		m.total += d
		switch i {
		case 3, 4: // idle, iowait
			m.idle += d
		case 7:
			m.steal += d
		}
	}
	return m, true
}

// loadAverage is the one-minute load average.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

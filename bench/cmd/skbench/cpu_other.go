//go:build !linux

package main

import "time"

// processCPU, selfCPU, machineCPU and loadAverage are only measured on Linux.
func processCPU(int) (time.Duration, bool)             { return 0, false }
func selfCPU() (time.Duration, bool)                   { return 0, false }
func machineCPU() (total, idle time.Duration, ok bool) { return 0, 0, false }
func loadAverage() (float64, bool)                     { return 0, false }

//go:build !linux

package main

import "time"

// processCPU, selfCPU, machineCPU and loadAverage are only measured on Linux.
func processCPU(int) (time.Duration, bool) { return 0, false }
func selfCPU() (time.Duration, bool)       { return 0, false }
func machineCPU() (machineTime, bool)      { return machineTime{}, false }
func loadAverage() (float64, bool)         { return 0, false }

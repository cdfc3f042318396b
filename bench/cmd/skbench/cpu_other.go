//go:build !linux

package main

import "time"

// processCPU, selfCPU and loadAverage are only measured on Linux.
func processCPU(int) (time.Duration, bool) { return 0, false }
func selfCPU() (time.Duration, bool)       { return 0, false }
func loadAverage() (float64, bool)         { return 0, false }

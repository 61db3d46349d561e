package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuSeconds returns the CPU time (user + system) of process pid and of its children it has
// waited for, from /proc (0 when it cannot be read).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at state (field 3).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime (fields 14–17)
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100 // USER_HZ
}

// parentOf returns the parent pid of pid (0 when unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// postgresCPU returns the CPU seconds used so far by the PostgreSQL server listening on
// port: its postmaster (including the backends it has reaped) and its live children.
func postgresCPU(port int) float64 {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	postmaster := 0
	want := "\x00-p\x00" + strconv.Itoa(port) + "\x00"
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("postgres")) && bytes.Contains(b, []byte(want)) {
			postmaster, _ = strconv.Atoi(filepath.Base(filepath.Dir(p)))
			break
		}
	}
	if postmaster == 0 {
		return 0
	}
	total := cpuSeconds(postmaster)
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if parentOf(pid) == postmaster {
			total += cpuSeconds(pid)
		}
	}
	return total
}

// processesNaming counts the live processes whose command line contains s (zombies, whose
// command line is empty, are not counted).
func processesNaming(s string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			n++
		}
	}
	return n
}

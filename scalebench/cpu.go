package scalebench

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// The raw limits are measured with the machine to themselves; a cell shares it between the
// replicas, the load generator and the servers. Where a cell stops short of a raw limit, the CPU
// says whether the machine was full and who used it, so "the machine binds" is measured, not
// assumed.

// CPU is what a cell cost the machine's processors.
type CPU struct {
	Cores     int     `json:"cores"`      // online processors
	CoresBusy float64 `json:"cores_busy"` // average processors busy during the cell, of Cores
	// MsPerPurchase is CPU time per purchase by who spent it: "replicas", "ZooKeeper",
	// "database", "Redis", "generator" (this process), "other".
	MsPerPurchase map[string]float64 `json:"cpu_ms_per_purchase"`
}

// cpuKinds are the columns of the CPU table, in order.
var cpuKinds = []string{"replicas", "ZooKeeper", "database", "Redis", "generator", "other"}

// kindOf tells who a process is by its command name. Every JVM on the benchmark machine is a
// ZooKeeper server (the Curator workers run only in the tests).
func kindOf(pid int, comm string) string {
	switch {
	case pid == os.Getpid():
		return "generator"
	case comm == "orderd":
		return "replicas"
	case comm == "java":
		return "ZooKeeper"
	case comm == "mariadbd" || comm == "mysqld":
		return "database"
	case comm == "redis-server":
		return "Redis"
	}
	return "other"
}

// cpuSample is the CPU time spent so far, in seconds: by the whole machine (busy, not idle or
// waiting for I/O) and by each process alive now.
type cpuSample struct {
	at    time.Time
	busy  float64
	procs map[int]procSeconds
}

type procSeconds struct {
	kind    string
	seconds float64
}

// sampleCPU reads /proc. A process that exits between two samples takes its time with it; the
// processes that matter live through the whole benchmark. With only set, a server or replica
// counts as one only when its command line holds one of only's strings; others are "other".
func sampleCPU(only []string) (cpuSample, error) {
	s := cpuSample{at: time.Now(), procs: map[int]procSeconds{}}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return s, fmt.Errorf("cpu: %w", err)
	}
	stat, err := fs.Stat()
	if err != nil {
		return s, fmt.Errorf("cpu: %w", err)
	}
	t := stat.CPUTotal // guest time is already in user and nice
	s.busy = t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
	procs, err := fs.AllProcs()
	if err != nil {
		return s, fmt.Errorf("cpu: %w", err)
	}
	for _, p := range procs {
		ps, err := p.Stat()
		if err != nil {
			continue // gone since the listing
		}
		kind := kindOf(p.PID, ps.Comm)
		if len(only) > 0 && kind != "generator" && kind != "other" && !cmdlineHolds(p, only) {
			kind = "other"
		}
		s.procs[p.PID] = procSeconds{kind: kind, seconds: ps.CPUTime()}
	}
	return s, nil
}

// cpuBetween is what happened between two samples, for n purchases. Only processes alive at both
// samples count by kind, so that a process started meanwhile is not charged its whole life.
func cpuBetween(before, after cpuSample, cores int, purchases float64) CPU {
	c := CPU{Cores: cores, MsPerPurchase: map[string]float64{}}
	if secs := after.at.Sub(before.at).Seconds(); secs > 0 {
		c.CoresBusy = (after.busy - before.busy) / secs
	}
	if purchases <= 0 {
		return c
	}
	for pid, p := range after.procs {
		if p0, ok := before.procs[pid]; ok && p0.kind == p.kind {
			c.MsPerPurchase[p.kind] += max(0, p.seconds-p0.seconds) * 1000 / purchases
		}
	}
	return c
}

// cmdlineHolds says whether p's command line holds one of the strings.
func cmdlineHolds(p procfs.Proc, only []string) bool {
	args, err := p.CmdLine()
	if err != nil {
		return false
	}
	line := strings.Join(args, " ")
	for _, o := range only {
		if o != "" && strings.Contains(line, o) {
			return true
		}
	}
	return false
}

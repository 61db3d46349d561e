package slurmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestClusterRunsAJob checks that the private cluster is up with one idle node of 2 CPUs
// in the default partition, and that sbatch runs a job on it with the cluster's
// environment.
func TestClusterRunsAJob(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Command(ctx, "sinfo", "--noheader", "--format=%P %c %T").CombinedOutput()
	if err != nil {
		t.Fatalf("sinfo: %v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), Partition+"* 2 idle"; got != want {
		t.Fatalf("sinfo = %q, want %q", got, want)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	out, err = c.Command(ctx, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "echo \"$SLURM_CONF\" > "+marker).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	if err := waitFor(time.Minute, func() bool { data, _ := os.ReadFile(marker); return len(data) > 0 }); err != nil {
		t.Fatalf("the job did not run within a minute:\n%s", c.Logs())
	}
	if data, _ := os.ReadFile(marker); strings.TrimSpace(string(data)) != c.Conf {
		t.Errorf("the job saw SLURM_CONF=%q, want %q", strings.TrimSpace(string(data)), c.Conf)
	}
}

// TestReapLeftovers checks that a process left by a killed run (its owner gone) is killed
// by the next run, and that one of a live run is not.
func TestReapLeftovers(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep program")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadOwner := gone.Process.Pid
	start := func(dir string, owner int) *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		cmd.Env = append(os.Environ(), envDir+"="+dir, envOwner+"="+strconv.Itoa(owner))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		go cmd.Wait() //nolint:errcheck // reaped so that exited sees it gone
		return cmd
	}
	orphan := start(filepath.Join(os.TempDir(), "slurmtest-leftover-of-a-killed-run"), deadOwner)
	live := start(filepath.Join(os.TempDir(), "slurmtest-of-a-live-run"), os.Getpid())
	reapLeftovers()
	if err := waitFor(30*time.Second, func() bool { return exited(orphan) }); err != nil {
		t.Fatal("the orphan of a killed run is still running")
	}
	if exited(live) {
		t.Error("a process of a live run was killed")
	}
}

package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

var _ persist.PatchLocker = (*fileQueue)(nil)

// LockPatches implements PatchLocker with an exclusive flock on a file of the queue's
// directory per partition (locks/patch-<digest of the partition>): flock excludes other
// processes and other open handles of this process alike. Waiting polls every 5 ms so
// that ctx can end it.
func (fq *fileQueue) LockPatches(ctx context.Context, partition string) (func(), error) {
	sum := sha256.Sum256([]byte(partition))
	dir := filepath.Join(fq.dir, "locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("patch lock: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "patch-"+hex.EncodeToString(sum[:8])), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("patch lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("patch lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

package filestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Recovery. A flush or compaction first records its output fragment in meta.db as
// pending (with the writing process's owner token) and claims its inputs, then writes
// the file (temporary name, fsync, rename), then in one transaction makes it live and
// drops its inputs. A process that dies anywhere in between leaves a pending row whose
// owner is dead. Each process holds an exclusive flock on owners/{token}.lock for its
// lifetime, so a lock that can be taken belongs to a dead process. Recovery (at Open and
// after every compaction pass) releases the claims of dead owners, deletes their files,
// and deletes every file in data/ that meta.db does not name. The rows such a flush had
// claimed never left the tail, so nothing durable is lost.

// ownerLock is this process's liveness lock.
type ownerLock struct {
	token string
	f     *os.File
}

func newToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random owner token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func acquireOwner(dir string) (*ownerLock, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	// The file is locked under a name recovery ignores, then renamed: a lock file
	// that recovery can see is always already locked by its live owner.
	tmp := filepath.Join(dir, "owners", token+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create owner lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("lock owner file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "owners", token+".lock")); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("publish owner lock: %w", err)
	}
	return &ownerLock{token: token, f: f}, nil
}

func (o *ownerLock) release(dir string) {
	os.Remove(filepath.Join(dir, "owners", o.token+".lock"))
	o.f.Close()
}

// deadOwners returns the tokens whose lock file can be locked (their process is gone),
// holding those locks until done is called, so that a token is cleaned by one process.
func deadOwners(dir, self string) (tokens []string, done func()) {
	entries, _ := os.ReadDir(filepath.Join(dir, "owners"))
	var files []*os.File
	for _, e := range entries {
		token, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || token == self {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, "owners", e.Name()), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // alive
			continue
		}
		tokens = append(tokens, token)
		files = append(files, f)
	}
	return tokens, func() {
		for i, f := range files {
			os.Remove(filepath.Join(dir, "owners", tokens[i]+".lock"))
			f.Close()
		}
	}
}

// recoverQueue releases the work of dead processes and deletes orphan files. It returns
// how many pending fragments were rolled back and how many files were deleted.
func (q *fileQueue) recoverQueue(ctx context.Context) (rolledBack, deleted int, err error) {
	dead, done := deadOwners(q.dir, q.owner.token)
	defer done()
	var files []string
	if len(dead) > 0 {
		err = q.w.do(ctx, func(t *wtx) error {
			files = files[:0]
			for _, token := range dead {
				rows, err := t.query(`SELECT id, file FROM fragments WHERE state = 0 AND owner = ?`, token)
				if err != nil {
					return fmt.Errorf("recover: %w", err)
				}
				var ids []int64
				for rows.Next() {
					var id int64
					var f string
					if err := rows.Scan(&id, &f); err != nil {
						rows.Close()
						return fmt.Errorf("recover: %w", err)
					}
					ids = append(ids, id)
					files = append(files, f)
				}
				rows.Close()
				for _, id := range ids {
					if _, err := t.exec(`UPDATE tail SET flush_id = NULL WHERE flush_id = ?`, id); err != nil {
						return fmt.Errorf("recover: %w", err)
					}
					if _, err := t.exec(`UPDATE fragments SET claim_id = NULL WHERE claim_id = ?`, id); err != nil {
						return fmt.Errorf("recover: %w", err)
					}
					if _, err := t.exec(`DELETE FROM fragments WHERE id = ?`, id); err != nil {
						return fmt.Errorf("recover: %w", err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		rolledBack = len(files)
	}
	n, err := q.deleteOrphans(ctx)
	return rolledBack, n, err
}

// deleteOrphans removes files in data/ that no fragments row names (pending or live),
// and the files of removed fragments. The directory is listed before meta.db is read: a
// file created after the listing is not considered, and a file listed has had its row
// inserted before it was created.
func (q *fileQueue) deleteOrphans(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(q.dataDir)
	if err != nil {
		return 0, fmt.Errorf("list data directory: %w", err)
	}
	rows, err := q.rdb.QueryContext(ctx, `SELECT file, state FROM fragments`)
	if err != nil {
		return 0, fmt.Errorf("list fragments: %w", err)
	}
	keep := map[string]bool{}
	var removed []string
	for rows.Next() {
		var f string
		var state int
		if err := rows.Scan(&f, &state); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list fragments: %w", err)
		}
		if state == 2 {
			removed = append(removed, f)
			continue
		}
		keep[f] = true
		keep[f+".tmp"] = true
	}
	rows.Close()
	n := 0
	for _, e := range entries {
		if e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(q.dataDir, e.Name())); err == nil {
			n++
		}
	}
	if len(removed) > 0 {
		err := q.w.do(ctx, func(t *wtx) error {
			for _, f := range removed {
				if _, err := t.exec(`DELETE FROM fragments WHERE file = ? AND state = 2`, f); err != nil {
					return fmt.Errorf("forget removed fragment: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

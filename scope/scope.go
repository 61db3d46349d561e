// Package scope opens blob-store scopes: a prefix in a blob store (gocloud.dev/blob) through
// which jobs read and write files, so that file bytes never ride the wire. It lives apart
// from the root SDK so that a program that only submits and works jobs does not link the
// blob drivers (and, through them, gRPC and OpenTelemetry).
package scope

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob" // mem:// buckets, for tests
	"gocloud.dev/gcerrors"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// EnvHome is the environment variable naming Lakeshore's home directory (the same as
// lakeshore.EnvHome). Defaults to ~/.lakeshore.
const EnvHome = "LAKESHORE_HOME"

// BlobsDir is the directory of the default file:// blob store inside $LAKESHORE_HOME.
const BlobsDir = "blobs"

// Scope is a prefix in a blob store through which jobs read and write files, so that file
// bytes never ride the wire: a job writes its output under a scope and returns the key,
// and whoever holds the key reads it back through a scope with the same prefix. Keys are
// relative to the scope's prefix, '/'-separated, and validated: no "..", ".", empty or
// absolute segments, no backslashes or NUL, valid UTF-8 — nothing can escape the prefix.
// Safe for concurrent use; Close releases the bucket.
type Scope struct {
	bucket *blob.Bucket
	prefix string // "" or ends with "/"
}

// Open opens the blob store at bucketURL and returns the scope prefix in it. bucketURL
// is a gocloud.dev/blob URL: "" is the default, file://$LAKESHORE_HOME/blobs (created when
// missing; $LAKESHORE_HOME defaults to ~/.lakeshore); "file:///dir" a directory; "mem://"
// an in-memory store (tests). prefix ("" for the whole bucket) follows the key rules.
// Errors: *KeyError (Is plane.ErrInvalid) for a bad prefix; the store's error when it cannot be
// opened.
func Open(ctx context.Context, bucketURL, prefix string) (*Scope, error) {
	if prefix != "" {
		if err := validateKey("prefix", strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, err
		}
		prefix = strings.TrimSuffix(prefix, "/") + "/"
	}
	var b *blob.Bucket
	var err error
	if bucketURL == "" {
		dir, derr := defaultBlobsDir()
		if derr != nil {
			return nil, derr
		}
		b, err = fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true})
	} else {
		b, err = blob.OpenBucket(ctx, bucketURL)
	}
	if err != nil {
		// The driver's message may repeat the URL, secrets and all: say it redacted.
		return nil, fmt.Errorf("open blob store %q: %s", plane.RedactURL(bucketURL), plane.RedactURLIn(err.Error(), bucketURL))
	}
	return &Scope{bucket: b, prefix: prefix}, nil
}

func defaultBlobsDir() (string, error) {
	home := os.Getenv(EnvHome)
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the default blob store: set %s: %w", EnvHome, err)
		}
		home = filepath.Join(h, ".lakeshore")
	}
	dir := filepath.Join(home, BlobsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

// Prefix returns the scope's prefix ("" or ending in "/").
func (s *Scope) Prefix() string { return s.prefix }

// Sub returns the scope prefix/name inside s, sharing its bucket (Close the parent only).
// Errors: *KeyError for a bad name.
func (s *Scope) Sub(name string) (*Scope, error) {
	if err := validateKey("prefix", strings.TrimSuffix(name, "/")); err != nil {
		return nil, err
	}
	return &Scope{bucket: s.bucket, prefix: s.prefix + strings.TrimSuffix(name, "/") + "/"}, nil
}

// Write stores data under key (replacing what was there) and returns key: pass it in a
// payload or result instead of the bytes. Errors: *KeyError for a bad key; the store's.
func (s *Scope) Write(ctx context.Context, key string, data []byte) (string, error) {
	if err := validateKey("key", key); err != nil {
		return "", err
	}
	if err := s.bucket.WriteAll(ctx, s.prefix+key, data, nil); err != nil {
		return "", fmt.Errorf("write %s%s: %w", s.prefix, key, err)
	}
	return key, nil
}

// Read returns the bytes stored under key. Errors: *KeyError for a bad key; plane.ErrNotFound
// when there is nothing under key; the store's.
func (s *Scope) Read(ctx context.Context, key string) ([]byte, error) {
	if err := validateKey("key", key); err != nil {
		return nil, err
	}
	b, err := s.bucket.ReadAll(ctx, s.prefix+key)
	if err != nil {
		return nil, blobError("read", s.prefix+key, err)
	}
	return b, nil
}

// Delete removes key. Errors: *KeyError for a bad key; plane.ErrNotFound when there is nothing
// under key; the store's.
func (s *Scope) Delete(ctx context.Context, key string) error {
	if err := validateKey("key", key); err != nil {
		return err
	}
	if err := s.bucket.Delete(ctx, s.prefix+key); err != nil {
		return blobError("delete", s.prefix+key, err)
	}
	return nil
}

// List returns the keys in the scope (relative to its prefix, recursively), sorted.
func (s *Scope) List(ctx context.Context) ([]string, error) {
	var keys []string
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.prefix, err)
		}
		if !obj.IsDir {
			keys = append(keys, strings.TrimPrefix(obj.Key, s.prefix))
		}
	}
}

// Close releases the bucket.
func (s *Scope) Close() error { return s.bucket.Close() }

func blobError(op, key string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%s %s: %w", op, key, plane.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// KeyError is a scope key or prefix that breaks the key rules. It matches plane.ErrInvalid (lakeshore.ErrInvalid).
type KeyError struct {
	// Field is "key" or "prefix".
	Field string
	Key   string
	// Rule says what is wrong and what is allowed.
	Rule string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("invalid scope %s %q: %s", e.Field, e.Key, e.Rule)
}

// Is matches plane.ErrInvalid.
func (e *KeyError) Is(target error) bool { return target == plane.ErrInvalid }

// maxKeyBytes bounds a scope key.
const maxKeyBytes = 1024

func validateKey(field, key string) error {
	fail := func(rule string) error { return &KeyError{Field: field, Key: key, Rule: rule} }
	switch {
	case key == "":
		return fail("empty; use a relative path like \"out/part-0.bin\"")
	case len(key) > maxKeyBytes:
		return fail(fmt.Sprintf("longer than %d bytes", maxKeyBytes))
	case !utf8.ValidString(key):
		return fail("not valid UTF-8")
	case strings.HasPrefix(key, "/"):
		return fail("absolute; use a path relative to the scope")
	case strings.ContainsAny(key, "\\\x00"):
		return fail("contains a backslash or NUL; use '/' to separate segments")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "..":
			return fail(`contains ".."; keys cannot leave the scope`)
		case ".":
			return fail(`contains a "." segment`)
		case "":
			return fail("contains an empty segment (\"//\" or a trailing '/')")
		}
	}
	return nil
}

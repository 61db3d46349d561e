package plane

import (
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// WorkerInfo describes a live worker process, registered by RunWorker and refreshed by
// its heartbeats, so `lakeshore workers` can list who is working.
type WorkerInfo struct {
	// ID identifies the worker (a ULID chosen by the worker).
	ID        string    `json:"id" msgpack:"id"`
	Namespace string    `json:"namespace" msgpack:"namespace"`
	Host      string    `json:"host" msgpack:"host"`
	PID       int       `json:"pid" msgpack:"pid"`
	Queues    []string  `json:"queues" msgpack:"queues"`
	StartedAt time.Time `json:"started_at" msgpack:"started_at"`
	// LastSeen is set by the plane at each WorkerRegister.
	LastSeen time.Time `json:"last_seen" msgpack:"last_seen"`
	// Provider is the provider that launched the worker ("" when started by hand), from
	// the LAKESHORE_PROVIDER environment variable.
	Provider string `json:"provider,omitempty" msgpack:"provider,omitempty"`
	// LaunchID is the provider's launch id ("" when started by hand), from the
	// LAKESHORE_LAUNCH_ID environment variable: a supervisor matches its launches to
	// registered workers by it.
	LaunchID string `json:"launch_id,omitempty" msgpack:"launch_id,omitempty"`
	// Running is how many jobs the worker ran at its last registration.
	Running int `json:"running" msgpack:"running"`
	// IdleSince is when the worker's last job ended (or when it started, if it ran none)
	// while Running is 0; zero while a job runs. A supervisor stops workers idle for longer
	// than the policy's IdleTimeout.
	IdleSince time.Time `json:"idle_since,omitzero" msgpack:"idle_since,omitempty"`
	// Offers is what the worker offers to the jobs it claims (its claims' Offers); nil:
	// nothing, so it runs only jobs without a requirement. A queued job that no live
	// registered worker's offers satisfy is reported as such (plane.Capable).
	Offers *Offers `json:"offers,omitempty" msgpack:"offers,omitempty"`
	// WarmHostKeys are the host keys the worker is warm for (its claims' WarmHostKeys).
	WarmHostKeys []string `json:"warm_host_keys,omitempty" msgpack:"warm_host_keys,omitempty"`
}

// WorkerListParams are the arguments of Driver.WorkerList.
type WorkerListParams struct {
	// Namespace restricts the list; "" lists all.
	Namespace string
	// SeenWithin drops workers whose last heartbeat is older. 0 means
	// WorkerSeenWithinDefault.
	SeenWithin time.Duration
}

// WorkerSeenWithinDefault: a worker silent for longer drops out of WorkerList.
const WorkerSeenWithinDefault = time.Minute

// Permission is what an access token allows on the queues it covers.
type Permission string

// The permissions.
const (
	// PermissionSubmit: submit, and read what one submitted (get, result, stream, cancel).
	PermissionSubmit Permission = "submit"
	// PermissionConsume: claim, ack, nack, heartbeat, post; register as a worker.
	PermissionConsume Permission = "consume"
	// PermissionRead: get, result, stream, count, topics' listen.
	PermissionRead Permission = "read"
	// PermissionAdmin: everything, including tokens and admission.
	PermissionAdmin Permission = "admin"
	// PermissionDataPut: put records and fields into data queues, flush, clear, KV puts
	// and clears (package persist over HTTP).
	PermissionDataPut Permission = "data:put"
	// PermissionDataRead: read data queues (ranges, streams, samplers, KV gets), and
	// mark or reset consumption.
	PermissionDataRead Permission = "data:read"
)

// TokenInfo is a stored access token: only the hash of its secret is kept.
type TokenInfo struct {
	// ID names the token for listing and revoking (not secret).
	ID string `json:"id" msgpack:"id"`
	// Hash is SHA-256 of the secret.
	Hash []byte `json:"-" msgpack:"hash"`
	// Namespace and Queue are globs (path.Match syntax) of what the token covers.
	Namespace   string       `json:"namespace" msgpack:"namespace"`
	Queue       string       `json:"queue" msgpack:"queue"`
	Permissions []Permission `json:"permissions" msgpack:"permissions"`
	CreatedAt   time.Time    `json:"created_at" msgpack:"created_at"`
	// ExpiresAt is when the token stops working; zero means never.
	ExpiresAt time.Time `json:"expires_at,omitzero" msgpack:"expires_at"`
	// RevokedAt is when it was revoked; zero while it is not.
	RevokedAt time.Time `json:"revoked_at,omitzero" msgpack:"revoked_at"`
}

// WorkerHostRule is what WorkerInfo.Host may be.
const WorkerHostRule = "use at most 255 bytes of UTF-8 without control characters"

// WorkerIDRule is what WorkerInfo.ID may be. The id is the last segment of an HTTP path
// (DELETE /v1/namespaces/{ns}/workers/{id}, and a token's DELETE /v1/tokens/{id}), so it
// has no part between slashes that path cleaning would remove or fold: an empty one ("a//b",
// "/a", "a/"), "." or "..". Such an id could be stored but never named again over HTTP (a
// token made with id ".." could not be revoked by `lakeshore token revoke` over HTTP).
const WorkerIDRule = "use 1–128 bytes of printable ASCII without spaces, and no empty, \".\" or \"..\" part between slashes"

// validatePathID checks id against WorkerIDRule (rule: the rule to name), reporting field.
func validatePathID(field, id, rule string) error {
	if len(id) == 0 || len(id) > 128 {
		return Invalid(field, id, rule)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return Invalid(field, id, rule)
		}
	}
	for part := range strings.SplitSeq(id, "/") {
		if part == "" || part == "." || part == ".." {
			return Invalid(field, id, rule)
		}
	}
	return nil
}

// Validate checks a worker registration: the id, the namespace ("" means the default), the
// host, the pid and every queue name. Errors: *InvalidError naming the field and the rule.
func (w *WorkerInfo) Validate() error {
	if err := validatePathID("worker id", w.ID, WorkerIDRule); err != nil {
		return err
	}
	if w.Namespace != "" {
		if err := ValidateNamespace(w.Namespace); err != nil {
			return err
		}
	}
	if len(w.Host) > 255 || !utf8.ValidString(w.Host) || strings.IndexFunc(w.Host, unicode.IsControl) >= 0 {
		return Invalid("host", w.Host, WorkerHostRule)
	}
	if w.PID < 0 {
		return Invalid("pid", w.PID, "use a process id ≥ 0")
	}
	if w.Running < 0 {
		return Invalid("running", w.Running, "use a number of jobs ≥ 0")
	}
	for _, f := range []struct{ field, value string }{{"provider", w.Provider}, {"launch id", w.LaunchID}} {
		if len(f.value) > 255 || !utf8.ValidString(f.value) || strings.IndexFunc(f.value, unicode.IsControl) >= 0 {
			return Invalid(f.field, f.value, "use at most 255 bytes of UTF-8 without control characters")
		}
	}
	if len(w.Queues) > 1024 {
		return Invalid("worker queues", len(w.Queues), "name at most 1024 queues")
	}
	if err := w.Offers.Validate("offers"); err != nil {
		return err
	}
	if err := ValidateWarmHostKeys(w.WarmHostKeys); err != nil {
		return err
	}
	for _, q := range w.Queues {
		if err := ValidateName("queue name", q); err != nil {
			return err
		}
	}
	return nil
}

// TokenIDRule is what TokenInfo.ID may be (the rule of worker ids).
const TokenIDRule = WorkerIDRule

// TokenGlobRule is what TokenInfo.Namespace and TokenInfo.Queue may be.
const TokenGlobRule = "use a path.Match pattern of 1–128 bytes of [A-Za-z0-9._-] and *?[]^, e.g. * or train-*"

// ErrTokenExists is the error of a TokenCreate whose id (or secret) is already stored. A
// revoked or expired token keeps its row and so its id: a replacement takes a new id.
func ErrTokenExists(id string) error {
	return Invalid("id", id, "a token with this id or secret exists already (a revoked or expired token keeps its id); "+
		"choose another id, e.g. with a suffix (team-a-2) when rotating")
}

// Validate checks a token to create: id (TokenIDRule), a 32-byte SHA-256 hash, the
// namespace and queue globs (TokenGlobRule) and at least one known permission. Errors:
// *InvalidError naming the field as on the wire.
func (tok *TokenInfo) Validate() error {
	if err := validatePathID("id", tok.ID, TokenIDRule); err != nil {
		return err
	}
	if len(tok.Hash) != 32 {
		return Invalid("hash", fmt.Sprintf("of %d bytes", len(tok.Hash)), "use the 32-byte SHA-256 of the secret")
	}
	for _, g := range []struct{ field, glob string }{{"namespace", tok.Namespace}, {"queue", tok.Queue}} {
		if len(g.glob) == 0 || len(g.glob) > 128 {
			return Invalid(g.field, g.glob, TokenGlobRule)
		}
		for i := 0; i < len(g.glob); i++ {
			c := g.glob[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-*?[]^", c) >= 0) {
				return Invalid(g.field, g.glob, TokenGlobRule)
			}
		}
		if _, err := path.Match(g.glob, ""); err != nil {
			return Invalid(g.field, g.glob, TokenGlobRule)
		}
	}
	if len(tok.Permissions) == 0 {
		return Invalid("permissions", nil, "give at least one of submit|consume|read|admin|data:put|data:read")
	}
	for _, p := range tok.Permissions {
		switch p {
		case PermissionSubmit, PermissionConsume, PermissionRead, PermissionAdmin, PermissionDataPut, PermissionDataRead:
		default:
			return Invalid("permissions", string(p), "use submit|consume|read|admin|data:put|data:read")
		}
	}
	return nil
}

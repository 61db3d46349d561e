package plane

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// NameRule is what a queue, topic or namespace name may be.
const NameRule = "use 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'"

// ValidateName checks a queue, topic or namespace name against NameRule. field names the
// argument in the error ("queue name", "topic name", "namespace").
func ValidateName(field, name string) error {
	if len(name) == 0 || len(name) > 128 || name[0] == '.' || name[0] == '-' {
		return Invalid(field, name, NameRule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return Invalid(field, name, NameRule)
		}
	}
	return nil
}

// KeyRule is what an idempotency key may be.
const KeyRule = "use 1–512 bytes of UTF-8 without NUL"

// ValidateKey checks a non-empty idempotency key against KeyRule.
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > 512 || !utf8.ValidString(key) {
		return Invalid("idempotency key", key, KeyRule)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return Invalid("idempotency key", key, KeyRule)
		}
	}
	return nil
}

// ValidateTemperature checks a boltzmann temperature: > 0 and finite.
func ValidateTemperature(t float64) error {
	if !(t > 0) || math.IsInf(t, 0) {
		return Invalid("temperature", t, "use a finite number > 0")
	}
	return nil
}

// ValidateValueSize checks an encoded value against MaxValueBytes.
func ValidateValueSize(field string, n int) error {
	if n > MaxValueBytes {
		return &InvalidError{Field: field, Value: fmt.Sprintf("of %d bytes", n),
			Rule: fmt.Sprintf("the limit is %d bytes (16 MiB); store large data in a blob store and pass its key", MaxValueBytes)}
	}
	return nil
}

// ValidateID checks that id looks like a ULID: 26 characters of Crockford base32.
func ValidateID(id string) error {
	if len(id) != 26 {
		return Invalid("invocation id", id, "use a 26-character ULID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return Invalid("invocation id", id, "use a 26-character ULID (Crockford base32, upper case)")
		}
	}
	if id[0] > '7' {
		return Invalid("invocation id", id, "use a 26-character ULID (first character 0–7)")
	}
	return nil
}

// Validate checks the params of a submit and fills nothing in. Errors: *InvalidError.
func (p *SubmitManyParams) Validate() error {
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	for i := range p.Invocations {
		s := &p.Invocations[i]
		if s.ID != "" {
			if err := ValidateID(s.ID); err != nil {
				return err
			}
		}
		if s.Key != "" {
			if err := ValidateKey(s.Key); err != nil {
				return err
			}
		}
		if math.IsNaN(s.Priority) || math.IsInf(s.Priority, 0) {
			return Invalid("priority", s.Priority, "use a finite number")
		}
		if s.MaxAttempts < 0 {
			return Invalid("max attempts", s.MaxAttempts, "use a number ≥ 1, or 0 for the default (3)")
		}
		if s.AttemptTimeout < 0 {
			return Invalid("attempt timeout", s.AttemptTimeout, "use a duration ≥ 0 (0: none)")
		}
		if s.Delay < 0 {
			return Invalid("delay", s.Delay, "use a duration ≥ 0 (0: claimable at once)")
		}
		if err := ValidateValueSize("payload", len(s.Payload)); err != nil {
			return err
		}
		if err := ValidateMetadata(s.Metadata); err != nil {
			return err
		}
	}
	return nil
}

// MetadataRule is what an envelope's metadata may be.
const MetadataRule = "use keys of 1–256 bytes and values of valid UTF-8 without NUL, at most 64 KiB in all; pass data in the payload or by storage key"

// MaxMetadataBytes bounds the keys and values of one envelope's metadata together.
const MaxMetadataBytes = 64 << 10

// ValidateMetadata checks an envelope's metadata against MetadataRule.
func ValidateMetadata(m map[string]string) error {
	total := 0
	for k, v := range m {
		total += len(k) + len(v)
		if len(k) == 0 || len(k) > 256 || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return Invalid("metadata key", k, MetadataRule)
		}
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return Invalid("metadata value of "+strconv.Quote(k), nil, MetadataRule)
		}
	}
	if total > MaxMetadataBytes {
		return &InvalidError{Field: "metadata", Value: fmt.Sprintf("of %d bytes", total), Rule: MetadataRule}
	}
	return nil
}

// Validate checks the params of a claim. Errors: *InvalidError.
func (p *ClaimParams) Validate() error {
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	if _, err := ParseKind(string(p.Kind)); err != nil {
		return err
	}
	if p.Kind == KindBoltzmann {
		if err := ValidateTemperature(p.Temperature); err != nil {
			return err
		}
	}
	if p.Max < 0 || p.LeaseTTL < 0 || p.Wait < 0 {
		return Invalid("claim", fmt.Sprintf("max=%d lease=%s wait=%s", p.Max, p.LeaseTTL, p.Wait), "use max ≥ 0, lease ≥ 0, wait ≥ 0")
	}
	return ValidateLeaseTTL(p.LeaseTTL)
}

// ValidateLeaseTTL checks the lease of a claim or heartbeat: 0 (the default) up to
// LeaseTTLMax. A longer lease would leave a dead worker's job stuck for that long.
func ValidateLeaseTTL(ttl time.Duration) error {
	if ttl < 0 || ttl > LeaseTTLMax {
		return Invalid("lease", ttl, fmt.Sprintf("use a duration from 0 (the default %s) to %s; heartbeat to keep a long job", LeaseTTLDefault, LeaseTTLMax))
	}
	return nil
}

// Validate checks a heartbeat. Errors: *InvalidError.
func (p *HeartbeatParams) Validate() error {
	if err := ValidateID(p.ID); err != nil {
		return err
	}
	return ValidateLeaseTTL(p.LeaseTTL)
}

// Validate checks a journal reference. Errors: *InvalidError.
func (j Journal) Validate() error {
	if j.InvocationID != "" {
		if j.Topic != "" {
			return Invalid("journal", j.Topic, "name an invocation id or a topic, not both")
		}
		return ValidateID(j.InvocationID)
	}
	if err := ValidateName("namespace", j.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", j.Queue); err != nil {
		return err
	}
	return ValidateName("topic name", j.Topic)
}

// Validate checks the params of a listing and fills nothing in. Errors: *InvalidError.
func (p *ListParams) Validate() error {
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	if p.State != "" {
		if _, err := ParseState(string(p.State)); err != nil {
			return err
		}
	}
	if p.KeyPrefix != "" {
		if err := ValidateKey(p.KeyPrefix); err != nil {
			return Invalid("key prefix", p.KeyPrefix, KeyRule)
		}
	}
	if p.After != "" {
		if err := ValidateID(p.After); err != nil {
			return Invalid("cursor", p.After, "pass the Next of the previous page, or nothing for the first page")
		}
	}
	if p.Limit < 0 || p.Limit > ListLimitMax {
		return Invalid("limit", p.Limit, fmt.Sprintf("use 1–%d, or 0 for the default %d", ListLimitMax, ListLimitDefault))
	}
	return nil
}

// ListScanFactor bounds the index entries one page of a listing with a KeyPrefix examines:
// ListScanFactor × the page's limit. A page may therefore hold fewer invocations than its
// limit and still have a Next cursor: the listing goes on from there.
const ListScanFactor = 10

// Validate checks the params of one settle: a valid id, a known outcome, a result of at
// most MaxValueBytes. Errors: *InvalidError.
func (p *SettleParams) Validate() error {
	if err := ValidateID(p.ID); err != nil {
		return err
	}
	if p.Outcome < OutcomeSucceeded || p.Outcome > OutcomeTimedOut {
		return Invalid("outcome", int(p.Outcome), "use succeeded, retry, failed or timed out")
	}
	return ValidateValueSize("result", len(p.Result))
}

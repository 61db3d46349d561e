package plane

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
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

// NamespaceRule is what a namespace name may be: NameRule, and not starting with '_'
// either (names starting with '_' are the stores' own: the distributed data store keys
// namespaced queues "_ns/{namespace}/…").
const NamespaceRule = "use 1–128 bytes of [A-Za-z0-9._-], not starting with '.', '_' or '-'"

// ValidateNamespace checks a namespace name against NamespaceRule, for jobs and data
// alike. Errors: *InvalidError naming field "namespace".
func ValidateNamespace(name string) error {
	if ValidateName("namespace", name) != nil || name[0] == '_' {
		return Invalid("namespace", name, NamespaceRule)
	}
	return nil
}

// KeyRule is what an idempotency key may be.
const KeyRule = "use 1–512 bytes of UTF-8 without NUL"

// ValidateKey checks a non-empty idempotency key against KeyRule.
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > 512 || !utf8.ValidString(key) {
		return Invalid("key", key, KeyRule)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return Invalid("key", key, KeyRule)
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
	if err := ValidateNamespace(p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	if len(p.Invocations) > SubmitManyMax {
		return &InvalidError{Field: "invocations", Value: fmt.Sprintf("of %d items", len(p.Invocations)),
			Rule: fmt.Sprintf("submit at most %d invocations per batch; split larger batches", SubmitManyMax)}
	}
	for i := range p.Invocations {
		if err := p.Invocations[i].validate(); err != nil {
			if len(p.Invocations) > 1 {
				return itemError("invocations", i, err)
			}
			return err
		}
	}
	return validateBatchDebounce(p.Invocations)
}

// itemError prefixes the Field of an *InvalidError with the list and the index of the item
// it is about, e.g. "invocations[3].priority".
func itemError(list string, i int, err error) error {
	var ie *InvalidError
	if errors.As(err, &ie) && ie.Message == "" {
		c := *ie
		c.Field = fmt.Sprintf("%s[%d].%s", list, i, ie.Field)
		return &c
	}
	return err
}

// MaxAttemptsRule says which max_attempts a submit or schedule takes.
const MaxAttemptsRule = "use 1 to 10000 attempts, or 0 for the default (3)"

func (s *SubmitParams) validate() error {
	if s.ID != "" {
		if err := ValidateID(s.ID); err != nil {
			return err
		}
	}
	if s.Key != "" {
		if err := ValidateKey(s.Key); err != nil {
			return err
		}
		if strings.HasPrefix(s.Key, ScheduleKeyPrefix) {
			return Invalid("key", s.Key, ScheduleKeyRule)
		}
	}
	if math.IsNaN(s.Priority) || math.IsInf(s.Priority, 0) {
		return Invalid("priority", s.Priority, "use a finite number")
	}
	if s.MaxAttempts < 0 || s.MaxAttempts > MaxAttemptsMax {
		return Invalid("max_attempts", s.MaxAttempts, MaxAttemptsRule)
	}
	if s.AttemptTimeout < 0 {
		return Invalid("attempt_timeout", s.AttemptTimeout, "use a duration ≥ 0 (0: none)")
	}
	if err := ValidateDelay("delay", s.Delay); err != nil {
		return err
	}
	if err := validateUniqueFor(s.UniqueFor, s.Key); err != nil {
		return err
	}
	if err := validateDebounce(s.Debounce, s.UniqueFor, s.Key); err != nil {
		return err
	}
	if s.ConcurrencyKey != "" {
		if err := ValidateConcurrencyKey("concurrency_key", s.ConcurrencyKey); err != nil {
			return err
		}
	}
	if err := s.Requirement.Validate("requirement"); err != nil {
		return err
	}
	if s.ConcurrencyKey != "" && !s.Requirement.IsZero() {
		return Invalid("concurrency_key", s.ConcurrencyKey,
			"give a requirement or a concurrency key, not both (a keyed claim does not match requirements yet)")
	}
	if k, ok := s.Metadata[MetaHostKey]; ok {
		if err := ValidateHostKey("metadata["+MetaHostKey+"]", k); err != nil {
			return err
		}
	}
	for _, k := range []string{MetaDebounce, MetaUniqueFor} {
		if _, ok := s.Metadata[k]; ok {
			return Invalid("metadata key", k, WindowMarkRule)
		}
	}
	if !s.NotBefore.IsZero() && (s.NotBefore.Year() < 1970 || s.NotBefore.Year() > 9999) {
		return Invalid("not_before", s.NotBefore, "use a time between the years 1970 and 9999")
	}
	if err := ValidateValueSize("payload", len(s.Payload)); err != nil {
		return err
	}
	return ValidateMetadata(s.Metadata)
}

// IDTaken is the error of a submit whose client-chosen id already names an invocation of
// another queue. Invocation ids are one space across every namespace; the answer is the
// same whichever queue or namespace holds the id, and says only that the id cannot be used
// here (IDUnusableRule), never that an invocation holds it: it does not confirm to a
// tenant that another tenant's id exists (docs/semantics.md, "Invocation id").
func IDTaken(id string) error {
	return Invalid("id", id, IDUnusableRule)
}

// IDUnusableRule is IDTaken's rule: what a client id is for and what to send instead,
// without saying whether, or where, an invocation has the id. Before, it answered "it is
// already the id of another invocation", which told a holder of another tenant's id that
// the id exists there.
const IDUnusableRule = "this id cannot be used for a new invocation here; " +
	"a client id only makes a retried submit safe: use a fresh ULID for each new invocation"

// SubmitManyMax is the most invocations one InvocationSubmitMany (one batch submit) may
// carry. A batch is one write transaction: 10,000 small invocations hold the writer about
// half a second on SQLite, which every other submitter waits for.
const SubmitManyMax = 10_000

// SettleManyMax is the most settles, or heartbeats, one request to a server may carry
// (POST /v1/settle, /v1/heartbeat, …/settle-and-claim): like a batch submit, each is one
// write transaction that every other writer waits for. plane/httpplane splits a larger
// InvocationSettleMany or InvocationHeartbeatMany into requests of at most this many.
const SettleManyMax = SubmitManyMax

// ClaimMaxLimit is the largest Max of one claim: one claim is one write transaction, and
// its answer carries every payload.
const ClaimMaxLimit = 1000

// DelayMax is the longest Delay of a submit and RetryDelay of a settle (366 days).
const DelayMax = 366 * 24 * time.Hour

// ValidateDelay checks a delay (field "delay" or "retry_delay"): 0 up to DelayMax.
func ValidateDelay(field string, d time.Duration) error {
	if d < 0 || d > DelayMax {
		return Invalid(field, d, "use a duration from 0 to 366 days (0: no delay)")
	}
	return nil
}

// ErrorTypeRule is what the Type of a settle's error may be.
const ErrorTypeRule = "use at most 128 bytes of printable ASCII without spaces (a name such as ValueError)"

// ValidErrorType reports whether t keeps ErrorTypeRule ("" is valid: the plane makes it
// "error").
func ValidErrorType(t string) bool {
	if len(t) > 128 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

// MaxErrorMessageBytes bounds the Message of a settle's error (64 KiB). A longer message is
// cut to its first MaxErrorMessageBytes bytes (at a UTF-8 boundary) and ends with
// ErrorMessageCut: workers whose stderr is long still settle.
const MaxErrorMessageBytes = 64 << 10

// ErrorMessageCut ends an error message that was cut to MaxErrorMessageBytes.
const ErrorMessageCut = " … [cut]"

// CutErrorMessage returns m with invalid UTF-8 replaced by U+FFFD, cut to at most
// MaxErrorMessageBytes bytes (ending with ErrorMessageCut when it was cut), never splitting
// a UTF-8 sequence.
func CutErrorMessage(m string) string {
	m = strings.ToValidUTF8(m, "\uFFFD")
	if len(m) <= MaxErrorMessageBytes {
		return m
	}
	n := MaxErrorMessageBytes - len(ErrorMessageCut)
	for n > 0 && !utf8.RuneStart(m[n]) {
		n--
	}
	return m[:n] + ErrorMessageCut
}

// Validate checks a settle: the id, the outcome, the result's size, the error's type and
// the retry delay. The error's message is not refused for its length: the plane cuts it
// (CutErrorMessage). Errors: *InvalidError.
func (p *SettleParams) Validate() error {
	if err := ValidateID(p.ID); err != nil {
		return err
	}
	if p.Outcome < OutcomeSucceeded || p.Outcome > OutcomeReleased {
		return Invalid("outcome", int(p.Outcome), "use succeeded, retry, failed, timed out, rate limited or released")
	}
	if p.RateLimitKey != "" {
		if err := ValidateConcurrencyKey("rate_limit_key", p.RateLimitKey); err != nil {
			return err
		}
	}
	if p.Outcome == OutcomeRateLimited && p.RetryDelay > UniqueForMax {
		return Invalid("retry_delay", p.RetryDelay, "use at most 366 days")
	}
	if err := ValidateValueSize("result", len(p.Result)); err != nil {
		return err
	}
	if p.Error != nil {
		if !ValidErrorType(p.Error.Type) {
			return Invalid("error.type", p.Error.Type, ErrorTypeRule)
		}
	}
	return ValidateDelay("retry_delay", p.RetryDelay)
}

// ClaimWorkerRule is what the Worker of a claim may be.
const ClaimWorkerRule = "use at most 128 bytes of UTF-8 without control characters"

// FrameReadLimitMax is the largest Limit of one FrameRead.
const FrameReadLimitMax = 1000

// FrameReadBytes is the byte budget of one FrameRead: a page stops after the frame whose
// value takes the values' total to FrameReadBytes or more (16 MiB), so it always holds at
// least one frame; the reader goes on from the last frame's seq.
const FrameReadBytes = 16 << 20

// Validate checks a frame read: the journal, since ≥ -1, limit 0–FrameReadLimitMax and
// wait ≥ 0. Errors: *InvalidError.
func (p *FrameReadParams) Validate() error {
	if err := p.Journal.Validate(); err != nil {
		return err
	}
	if p.Since < -1 {
		return Invalid("since", p.Since, "use a seq ≥ -1 (-1: from the start)")
	}
	if p.Limit < 0 || p.Limit > FrameReadLimitMax {
		return Invalid("limit", p.Limit, fmt.Sprintf("use 1–%d, or 0 for the default %d", FrameReadLimitMax, FrameReadLimitDefault))
	}
	if p.Wait < 0 {
		return Invalid("wait", p.Wait, "use a duration ≥ 0")
	}
	return nil
}

// FramePage gathers the frames of one FrameRead page under its limit and FrameReadBytes.
type FramePage struct {
	// Limit is the page's frame limit (already defaulted).
	Limit int
	// Frames are the frames gathered so far.
	Frames []Frame
	bytes  int
	full   bool
}

// Add appends f unless the page is full and reports whether another frame may follow.
func (g *FramePage) Add(f Frame) bool {
	if g.Full() {
		return false
	}
	g.Frames = append(g.Frames, f)
	g.bytes += len(f.Value)
	if g.bytes >= FrameReadBytes {
		g.full = true
	}
	return !g.Full()
}

// Full reports whether the page holds its limit of frames or FrameReadBytes of values.
func (g *FramePage) Full() bool {
	return g.full || len(g.Frames) >= g.Limit
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

// ClaimQueuesLimit is the most queues one claim may wait on (ClaimParams.Queue and
// Queues together, each counted once).
const ClaimQueuesLimit = 64

// QueueNames returns the distinct queues the claim may take from: Queue, then Queues in
// their order, each once.
func (p *ClaimParams) QueueNames() []string {
	if len(p.Queues) == 0 {
		return []string{p.Queue}
	}
	out := make([]string, 0, len(p.Queues)+1)
	out = append(out, p.Queue)
	for _, q := range p.Queues {
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// Validate checks the params of a claim. Errors: *InvalidError.
func (p *ClaimParams) Validate() error {
	if err := ValidateNamespace(p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	if len(p.Queues) > 0 {
		seen := map[string]struct{}{p.Queue: {}}
		for _, q := range p.Queues {
			if err := ValidateName("queues", q); err != nil {
				return err
			}
			if seen[q] = struct{}{}; len(seen) > ClaimQueuesLimit {
				return &InvalidError{Field: "queues", Value: fmt.Sprintf("more than %d queues", ClaimQueuesLimit),
					Rule: fmt.Sprintf("name at most %d distinct queues in one claim, its own queue included", ClaimQueuesLimit)}
			}
		}
	}
	if _, err := ParseKind(string(p.Kind)); err != nil {
		return err
	}
	if p.Kind == KindBoltzmann {
		if err := ValidateTemperature(p.Temperature); err != nil {
			return err
		}
	}
	if p.Max < 0 || p.Max > ClaimMaxLimit {
		return Invalid("max", p.Max, fmt.Sprintf("use 1–%d, or 0 for 1", ClaimMaxLimit))
	}
	if p.Wait < 0 {
		return Invalid("wait", p.Wait, "use a duration ≥ 0")
	}
	if len(p.Worker) > 128 || !utf8.ValidString(p.Worker) {
		return Invalid("worker", p.Worker, ClaimWorkerRule)
	}
	if err := p.Offers.Validate("offers"); err != nil {
		return err
	}
	if err := ValidateWarmHostKeys(p.WarmHostKeys); err != nil {
		return err
	}
	for _, r := range p.Worker {
		if unicode.IsControl(r) {
			return Invalid("worker", p.Worker, ClaimWorkerRule)
		}
	}
	return ValidateLeaseTTL(p.LeaseTTL)
}

// ValidateLeaseTTL checks the lease of a claim or heartbeat: 0 (the default) up to
// LeaseTTLMax. A longer lease would leave a dead worker's job stuck for that long.
func ValidateLeaseTTL(ttl time.Duration) error {
	if ttl < 0 || ttl > LeaseTTLMax {
		return Invalid("lease_ttl", ttl, fmt.Sprintf("use a duration from 0 (the default %s) to %s; heartbeat to keep a long job", LeaseTTLDefault, LeaseTTLMax))
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
	if err := ValidateNamespace(j.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", j.Queue); err != nil {
		return err
	}
	return ValidateName("topic name", j.Topic)
}

// Validate checks the params of a listing and fills nothing in. Errors: *InvalidError.
func (p *ListParams) Validate() error {
	if err := ValidateNamespace(p.Namespace); err != nil {
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
			return Invalid("key_prefix", p.KeyPrefix, KeyRule)
		}
	}
	if p.After != "" {
		if err := ValidateID(p.After); err != nil {
			return Invalid("cursor", p.After, "use the next cursor of the previous page (the CLI prints it after more:), or nothing for the first page")
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

// TokenRule says what a bearer token may hold: what one line of an HTTP header carries.
const TokenRule = "a token is one line of printable characters: no newline or other control character " +
	"(a token pasted or echoed with its line end: strip it; the token is not shown)"

// ValidateToken refuses a bearer token (a client's Config.Token, $LAKESHORE_TOKEN) that no
// HTTP Authorization header can carry: one holding a newline, carriage return, tab or any
// other control character. Without it the request fails in net/http ("invalid header field
// value"), which a client would retry and report as the plane unavailable. Errors:
// *InvalidError for field "token" that never shows the token (a secret).
func ValidateToken(token string) error {
	if strings.ContainsFunc(token, unicode.IsControl) {
		return Invalid("token", nil, TokenRule)
	}
	return nil
}

package plane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Placement (docs/semantics.md, "Placement"; docs/fabric.md). A submit may carry a
// Requirement — what its worker must offer: CPUs, memory, GPUs, a GPU type, labels. A claim
// carries the claiming worker's Offers and takes only the invocations whose requirement
// they satisfy (Offers.Satisfies). An invocation without a requirement is of the default
// shape, which every worker satisfies; a claim without offers takes only those. So a
// CPU-only worker that states nothing never takes a GPU job.
//
// The planes store each requirement's shape (Requirement.Shape, a digest) on the
// invocation and keep one row per (queue, shape) ever submitted: a claim with offers reads
// the queue's shapes (a few rows, not its jobs), keeps those its offers satisfy and reads
// only the head of each of those shapes through an index on (queue, shape, order), so a
// million jobs of shapes it cannot run cost it nothing. Claimable invocations of a shape
// other than the default live in an internal state (planekit.StateShaped) outside the
// claim indexes of the default shape, so a claim without offers costs what it cost before.

// Requirement is what an invocation needs from the worker that runs it. The field names
// and units are those of a compute mode's resources (fabric.Resources, docs/fabric.md): a
// zero field asks for nothing. The zero Requirement is the default shape.
type Requirement struct {
	// MilliCPUs is the CPU count × 1000 (cpus 0.5 is 500); 0: any. At most RequirementCPUsMax × 1000.
	MilliCPUs int64 `json:"cpus_milli,omitempty" msgpack:"cpus_milli,omitempty"`
	// MemoryBytes is the memory in bytes; 0: any. At most RequirementMemoryMax.
	MemoryBytes int64 `json:"memory_bytes,omitempty" msgpack:"memory_bytes,omitempty"`
	// GPUs is the GPU count; 0: none needed. At most RequirementGPUsMax.
	GPUs int64 `json:"gpus,omitempty" msgpack:"gpus,omitempty"`
	// GPUType is the GPU model ("a100"); "": any. PlacementNameRule says what it may be.
	GPUType string `json:"gpu_type,omitempty" msgpack:"gpu_type,omitempty"`
	// Labels must all be offered with the same values (zone, arch, …); nil: none. At most
	// PlacementLabelsMax; keys follow PlacementNameRule, values PlacementLabelValueRule.
	Labels map[string]string `json:"labels,omitempty" msgpack:"labels,omitempty"`
}

// Offers is what a worker offers to the jobs it claims, in Requirement's fields and units:
// MilliCPUs, MemoryBytes and GPUs it has (0: none), the GPUType of its GPUs ("": none
// named) and its Labels. The zero Offers (or nil) offers nothing: it satisfies only the
// default shape.
type Offers Requirement

// Limits of a requirement or an offer.
const (
	// RequirementCPUsMax is the largest CPU count (so MilliCPUs ≤ 1,024,000).
	RequirementCPUsMax = 1024
	// RequirementGPUsMax is the largest GPU count.
	RequirementGPUsMax = 1024
	// RequirementMemoryMax is the largest memory, in bytes (1 PiB).
	RequirementMemoryMax = int64(1) << 50
	// PlacementLabelsMax is the most labels of one requirement or offer.
	PlacementLabelsMax = 32
)

// PlacementNameRule is what a GPU type and a label key may be (a compute mode's rule).
const PlacementNameRule = "use 1-63 of [A-Za-z0-9_./-], starting with a letter or digit"

// PlacementLabelValueRule is what a label value may be.
const PlacementLabelValueRule = "use 0-255 bytes of printable UTF-8 without control characters"

var placementNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}$`)

// Validate checks r's fields against their limits, naming the field (under prefix, e.g.
// "requirement") of the first bad one. Errors: *InvalidError.
func (r *Requirement) Validate(prefix string) error {
	if r == nil {
		return nil
	}
	if r.MilliCPUs < 0 || r.MilliCPUs > RequirementCPUsMax*1000 {
		return Invalid(prefix+".cpus_milli", r.MilliCPUs, fmt.Sprintf("use 0–%d millicpus (0: any)", RequirementCPUsMax*1000))
	}
	if r.MemoryBytes < 0 || r.MemoryBytes > RequirementMemoryMax {
		return Invalid(prefix+".memory_bytes", r.MemoryBytes, fmt.Sprintf("use 0–%d bytes (0: any)", RequirementMemoryMax))
	}
	if r.GPUs < 0 || r.GPUs > RequirementGPUsMax {
		return Invalid(prefix+".gpus", r.GPUs, fmt.Sprintf("use 0–%d GPUs", RequirementGPUsMax))
	}
	if r.GPUType != "" && !placementNameRe.MatchString(r.GPUType) {
		return Invalid(prefix+".gpu_type", r.GPUType, PlacementNameRule)
	}
	if len(r.Labels) > PlacementLabelsMax {
		return Invalid(prefix+".labels", fmt.Sprintf("%d labels", len(r.Labels)), fmt.Sprintf("use at most %d labels", PlacementLabelsMax))
	}
	for _, k := range slices.Sorted(mapKeys(r.Labels)) {
		if !placementNameRe.MatchString(k) {
			return Invalid(prefix+".labels key", k, PlacementNameRule)
		}
		if v := r.Labels[k]; !ValidLabelValue(v) {
			return Invalid(prefix+".labels["+k+"]", v, PlacementLabelValueRule)
		}
	}
	return nil
}

// Validate checks o as Requirement.Validate does. Errors: *InvalidError.
func (o *Offers) Validate(prefix string) error {
	return (*Requirement)(o).Validate(prefix)
}

// ValidLabelValue reports whether v may be a label's value (PlacementLabelValueRule): at
// most 255 bytes of UTF-8 without control characters.
func ValidLabelValue(v string) bool {
	if len(v) > 255 || !validUTF8NoControl(v) {
		return false
	}
	return true
}

func validUTF8NoControl(s string) bool {
	for _, r := range s {
		if r == 0xFFFD || r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0) {
			return false
		}
	}
	return true
}

// IsZero reports whether r asks for nothing (the default shape).
func (r *Requirement) IsZero() bool {
	return r == nil || (r.MilliCPUs == 0 && r.MemoryBytes == 0 && r.GPUs == 0 && r.GPUType == "" && len(r.Labels) == 0)
}

// IsZero reports whether o offers nothing.
func (o *Offers) IsZero() bool { return (*Requirement)(o).IsZero() }

// Shape is r's shape key: "" for the default shape (r nil or zero), else "sh1_" and the
// first 16 bytes of a SHA-256 digest, in hex, of r's fields in a length-prefixed text
// (each field as name, byte length and value on a line; labels by key in byte order), so
// equal requirements — however their labels were ordered — have one shape. The "sh1_"
// prefix is the text's version.
func (r *Requirement) Shape() string {
	if r.IsZero() {
		return ""
	}
	var b strings.Builder
	b.WriteString("lakeshore shape 1\n")
	field := func(name, value string) {
		b.WriteString(name + " " + strconv.Itoa(len(value)) + ":" + value + "\n")
	}
	field("cpus_milli", strconv.FormatInt(r.MilliCPUs, 10))
	field("memory_bytes", strconv.FormatInt(r.MemoryBytes, 10))
	field("gpus", strconv.FormatInt(r.GPUs, 10))
	field("gpu_type", r.GPUType)
	for _, k := range slices.Sorted(mapKeys(r.Labels)) {
		field("label", k+"="+r.Labels[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sh1_" + hex.EncodeToString(sum[:16])
}

// Satisfies reports whether a worker offering o can run an invocation requiring r: every
// non-zero count of r is at most o's (an offer's 0 is none), r's GPU type (when set) is
// o's, and every label of r is in o with the same value. Every offer satisfies the default
// shape; nil offers satisfy only it.
func (o *Offers) Satisfies(r *Requirement) bool {
	if r.IsZero() {
		return true
	}
	if o == nil {
		return false
	}
	if r.MilliCPUs > o.MilliCPUs || r.MemoryBytes > o.MemoryBytes || r.GPUs > o.GPUs {
		return false
	}
	if r.GPUType != "" && r.GPUType != o.GPUType {
		return false
	}
	for k, v := range r.Labels {
		if have, ok := o.Labels[k]; !ok || have != v {
			return false
		}
	}
	return true
}

// EncodeRequirement is the stored form of r: its JSON, or nil for the default shape.
func EncodeRequirement(r *Requirement) []byte {
	if r.IsZero() {
		return nil
	}
	b, _ := json.Marshal(r) // a struct of numbers, strings and a string map: never fails
	return b
}

// DecodeRequirement reads a stored requirement (nil or empty: the default shape, nil).
func DecodeRequirement(b []byte) (*Requirement, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var r Requirement
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("stored requirement: %w", err)
	}
	return &r, nil
}

// offerValueRules says, for each name of ParseOffers whose value is parsed, what its value
// may be (the Python SDK's lakeshore/_offers.py says the same).
var offerValueRules = map[string]string{
	"cpus":   "cpus is a number of CPUs with at most three decimals (8, 0.5) or millicpus (500m)",
	"memory": "memory is a number of bytes with an optional unit (64GiB, 512MiB, 2G)",
	"gpus":   "gpus is a whole number (1)",
}

// ParseOffers reads offers (or a requirement) written as comma-separated NAME=VALUE pairs,
// the CLI's form: cpus (a decimal with at most three decimals, or millicpus "500m"),
// memory (bytes with an optional unit: K, M, G, T are powers of 1000, Ki, Mi, Gi, Ti of
// 1024, a trailing B optional), gpus (an integer), gpu_type, and label.KEY=VALUE for a
// label, e.g. "cpus=8,memory=64GiB,gpus=1,gpu_type=a100,label.zone=us-east"; each name at
// most once. "" is no offer. Errors: *InvalidError naming field and the pair.
func ParseOffers(field, s string) (*Offers, error) {
	o := &Offers{}
	if strings.TrimSpace(s) == "" {
		return o, nil
	}
	const rule = "use NAME=VALUE pairs separated by commas: cpus, memory, gpus, gpu_type, label.KEY"
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" {
			return nil, Invalid(field, pair, rule)
		}
		if seen[name] {
			return nil, Invalid(field, pair, name+" is given twice; "+rule+", each once")
		}
		seen[name] = true
		var err error
		switch {
		case name == "cpus":
			o.MilliCPUs, err = parseMilliCPUs(value)
		case name == "memory":
			o.MemoryBytes, err = parseMemory(value)
		case name == "gpus":
			o.GPUs, err = strconv.ParseInt(value, 10, 64)
		case name == "gpu_type":
			o.GPUType = value
		case strings.HasPrefix(name, "label."):
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			o.Labels[strings.TrimPrefix(name, "label.")] = value
		default:
			return nil, Invalid(field, pair, fmt.Sprintf("unknown name %q; %s", name, rule))
		}
		if err != nil {
			return nil, Invalid(field, pair, offerValueRules[name]+"; "+rule)
		}
	}
	if err := o.Validate(field); err != nil {
		return nil, err
	}
	return o, nil
}

func parseMilliCPUs(s string) (int64, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		return strconv.ParseInt(m, 10, 64)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 || whole == "" || whole[0] < '0' || whole[0] > '9' {
		return 0, fmt.Errorf("bad cpus")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || w > RequirementCPUsMax {
		return 0, fmt.Errorf("bad cpus")
	}
	var f int64
	if frac != "" {
		if f, err = strconv.ParseInt((frac + "00")[:3], 10, 64); err != nil || f < 0 {
			return 0, fmt.Errorf("bad cpus")
		}
	}
	return w*1000 + f, nil
}

func parseMemory(s string) (int64, error) {
	s = strings.TrimSuffix(s, "B")
	units := []struct {
		suffix string
		scale  int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	scale := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, scale = n, u.scale
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > RequirementMemoryMax/scale {
		return 0, fmt.Errorf("bad memory")
	}
	return n * scale, nil
}

// Warm host-key preference (docs/semantics.md, "Placement"; docs/fabric.md, "The host
// key"). An invocation's host key is its metadata's MetaHostKey (set by a submit of a
// compute mode); a claim may name the host keys its worker is warm for
// (ClaimParams.WarmHostKeys: it ran their set-up already). Among the jobs the claim may
// take, a job of a warm key is taken as if it had been submitted WarmHeadStart earlier
// (fifo), WarmHeadStart later (filo), or, for priority claims, so within its priority
// level (WarmFirst): a warm worker takes a warm job before colder ones submitted up to
// WarmHeadStart before it, and never passes over a job older than that — so no job
// starves when every worker is warm for other keys.

// MetaHostKey is the invocation metadata key holding its host key (fabric.MetaHostKey).
const MetaHostKey = "lakeshore.host_key"

// WarmHostKeysMax is the most host keys one claim may name warm.
const WarmHostKeysMax = 16

// WarmHeadStart is how much earlier a warm job counts as submitted (WarmFirst).
const WarmHeadStart = time.Minute

// HostKeyRule is what a host key may be: that of PlacementNameRule (a fabric host key is
// "hk1_" and 32 hex digits).
const HostKeyRule = PlacementNameRule

// ValidateHostKey checks a host key (field names it in the error). Errors: *InvalidError.
func ValidateHostKey(field, key string) error {
	if !placementNameRe.MatchString(key) {
		return Invalid(field, key, HostKeyRule)
	}
	return nil
}

// HostKeyOf returns the host key of an invocation's metadata ("" when it has none).
func HostKeyOf(metadata map[string]string) string { return metadata[MetaHostKey] }

// ValidateWarmHostKeys checks the warm host keys of a claim or a worker (at most
// WarmHostKeysMax, each as HostKeyRule says). Errors: *InvalidError naming warm_host_keys.
func ValidateWarmHostKeys(keys []string) error {
	if len(keys) > WarmHostKeysMax {
		return Invalid("warm_host_keys", fmt.Sprintf("%d keys", len(keys)), fmt.Sprintf("name at most %d host keys", WarmHostKeysMax))
	}
	for _, k := range keys {
		if err := ValidateHostKey("warm_host_keys", k); err != nil {
			return err
		}
	}
	return nil
}

// WarmFirst reports whether a claim of kind takes the warm job (warmID, warmPriority), the
// first of the jobs of its warm host keys, before the cold one (coldID, coldPriority), the
// first of the others, in kind's order: priority decides first (priority and boltzmann);
// then a warm job goes first unless the cold one was submitted more than WarmHeadStart
// before it (fifo, priority), or the warm one more than WarmHeadStart before the cold one
// (filo). The submit times are the ids' (ULIDs carry their millisecond); an id that is not
// a ULID counts as submitted at its order alone (no head start).
func WarmFirst(kind Kind, warmID string, warmPriority float64, coldID string, coldPriority float64) bool {
	if (kind == KindPriority || kind == KindBoltzmann) && warmPriority != coldPriority {
		return warmPriority > coldPriority
	}
	warm, err1 := ulid.ParseStrict(warmID)
	cold, err2 := ulid.ParseStrict(coldID)
	if err1 != nil || err2 != nil {
		return KeyTurnFirst(kind, warmID, warmPriority, coldID, coldPriority)
	}
	headStart := uint64(WarmHeadStart.Milliseconds())
	if kind == KindFILO {
		return warm.Time()+headStart >= cold.Time()
	}
	return warm.Time() <= cold.Time()+headStart
}

// CapableWorkers returns how many of workers (a registry listing: the live workers) serve
// the queue (namespace, queue) — it is one of their Queues — and offer what r requires
// (Offers.Satisfies), and how many serve it at all. A queued invocation with capable 0 has
// no capable worker: it waits, visibly, until one registers (lakeshore get, the
// dashboard); nothing refuses it, since a worker may be about to start.
func CapableWorkers(r *Requirement, namespace, queue string, workers []WorkerInfo) (capable, serving int) {
	for i := range workers {
		w := &workers[i]
		if w.Namespace != namespace || !slices.Contains(w.Queues, queue) {
			continue
		}
		serving++
		if w.Offers.Satisfies(r) {
			capable++
		}
	}
	return capable, serving
}

// Unplaceable is the work of one queue that no live worker can place: its queued jobs
// with a requirement that no live worker of the queue offers (CapableWorkers 0). They
// wait, since a worker without offers never takes a job with a requirement (docs/fabric.md,
// "Placement"); Unplaceable is how that wait is said where a user looks (lakeshore
// queues), from the demand counters and the registry, never from a scan of the jobs.
type Unplaceable struct {
	// Namespace and Queue are the queue.
	Namespace string
	Queue     string
	// Queued is the queued invocations (delayed ones included, as ShapeDemand counts
	// them) of every shape of the queue that no live worker can run.
	Queued int64
	// Example is the requirement of the shape among them with the most queued jobs.
	Example *Requirement
}

// UnplaceableWork returns, per queue of demand (a Driver.DemandList), its queued work that
// no live worker can place: the shapes with a requirement and queued jobs that none of
// workers (a Driver.WorkerList: the live workers) serving the queue offers
// (CapableWorkers), or, for a row a server counted (ShapeDemand.CapableWorkers not nil),
// that count is 0. Queues without such work are left out; the order is demand's. Pure:
// the caller reads the demand counters and the registry, off the claim path.
func UnplaceableWork(demand []ShapeDemand, workers []WorkerInfo) []Unplaceable {
	var out []Unplaceable
	at := map[[2]string]int{} // queue → its entry in out
	most := map[[2]string]int64{}
	for i := range demand {
		d := &demand[i]
		if d.Shape == "" || d.Requirement == nil || d.Queued <= 0 {
			continue // the default shape: every worker runs it
		}
		if d.CapableWorkers != nil {
			if *d.CapableWorkers > 0 {
				continue // a server's count over its whole registry (a token may see less)
			}
		} else if capable, _ := CapableWorkers(d.Requirement, d.Namespace, d.Queue, workers); capable > 0 {
			continue
		}
		k := [2]string{d.Namespace, d.Queue}
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, Unplaceable{Namespace: d.Namespace, Queue: d.Queue})
		}
		u := &out[j]
		u.Queued += d.Queued
		if d.Queued > most[k] {
			most[k], u.Example = d.Queued, d.Requirement
		}
	}
	return out
}

package persist

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// PutOpts are the options of one put batch (Store.PutPartition). A nil *PutOpts is
// the zero value.
type PutOpts struct {
	// ID, when set, is the batch's idempotency id: the store remembers it, with the
	// indexes the batch got, for at least PutIDRetention, and a put repeating it (a
	// retry whose first answer was lost: a timeout, a dropped connection, a server
	// killed after its commit) writes nothing and answers the same indexes. A repeat
	// must name the same partition and as many records (the records themselves are
	// not compared); otherwise it fails with *InvalidError. 1–128 bytes of
	// [A-Za-z0-9._:-]; NewPutID makes one. "" (the default) is a plain put.
	ID string
	// Admission, when set, is the put's back-pressure (see Admission): the put is
	// refused with *BackpressureError, or waits (Admission.Block), while the trainer
	// has too much left to consume or the put runs too far ahead of its version.
	Admission *Admission
}

// PutIDRetention is how long a store remembers the id of a put batch (PutOpts.ID) at
// least. Stores forget older ids during their flushes, so a repeat later than this may
// be written again.
const PutIDRetention = 10 * time.Minute

// NewPutID returns a new idempotency id for a put batch: a ULID (26 characters, time
// ordered, random), unique with overwhelming probability across processes and
// machines.
func NewPutID() string { return ulid.MustNew(ulid.Now(), rand.Reader).String() }

// putID returns the idempotency id of opts ("" for none), checked with CheckPutID.
// Errors: *InvalidError.
func putID(opts *PutOpts) (string, error) {
	if opts == nil || opts.ID == "" {
		return "", nil
	}
	if err := CheckPutID(opts.ID); err != nil {
		return "", err
	}
	return opts.ID, nil
}

// CheckPutID checks an idempotency id of a put batch (PutOpts.ID), for stores outside
// this package. Errors: *InvalidError naming put_id, as the HTTP parameter.
func CheckPutID(id string) error {
	ok := len(id) >= 1 && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0
	}
	if !ok {
		return &InvalidError{Field: "put_id", Value: id, Rule: "1–128 bytes of [A-Za-z0-9._:-]"}
	}
	return nil
}

// PutArgs are the checked arguments of a Store.PutPartition (CheckPut).
type PutArgs struct {
	ID        string     // PutOpts.ID, "" for none
	Admission *Admission // PutOpts.Admission, nil for none
	Target    int64      // TargetVersion of the records
}

// CheckPut checks the arguments of Store.PutPartition as every store does, in this
// order: the partition name, the put id (CheckPutID); then, when recs is not empty (a
// put of no records writes nothing and answers no indexes), the admission
// (CheckAdmission) and the records' weight versions (TargetVersion). Errors:
// *InvalidError.
func CheckPut(partition string, recs []Record, opts *PutOpts) (PutArgs, error) {
	if err := CheckName("partition", partition); err != nil {
		return PutArgs{}, err
	}
	id, err := putID(opts)
	if err != nil || len(recs) == 0 {
		return PutArgs{ID: id}, err
	}
	var adm *Admission
	if opts != nil {
		adm = opts.Admission
	}
	if err := CheckAdmission(adm); err != nil {
		return PutArgs{}, err
	}
	target, err := TargetVersion(recs)
	if err != nil {
		return PutArgs{}, err
	}
	return PutArgs{ID: id, Admission: adm, Target: target}, nil
}

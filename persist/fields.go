package persist

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// fieldNotices is what a Queue remembers of the field names its batch hand-outs
// (Reader.GetMeta, GetBatch, GetBatchLeased) asked for: those found in the queue's
// schema, never looked up again, and those warned about, never warned about again.
// Both sets only grow: a schema never loses a field, and a name is warned about once
// per Queue (per handle, as the Python SDK warns once per queue handle).
type fieldNotices struct {
	mu    sync.Mutex
	log   *slog.Logger
	known map[string]struct{}
	told  map[string]struct{}
}

// logger returns the Queue's logger: Config.Logger for a Queue of Open, SetLogger's,
// else the default of Config.WithDefaults (warnings to standard error).
func (n *fieldNotices) logger() *slog.Logger {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log == nil {
		n.log = Config{}.WithDefaults().Logger
	}
	return n.log
}

// SetLogger makes l receive the Queue's warnings about its reads (a batch hand-out
// asking for a field no record of the queue has: docs/persist.md, "A field no record
// has"). A Queue of Open uses Config.Logger; one of New, warnings to standard error
// until SetLogger. A nil l restores that default. Safe for concurrent use.
func (q *Queue) SetLogger(l *slog.Logger) {
	q.fields.mu.Lock()
	defer q.fields.mu.Unlock()
	q.fields.log = l
}

// UnknownFields returns the names of fields that schema does not have, in the order
// given, each once: the fields no record of the queue has (the schema is every field
// any record was put or updated with, and never loses one). A schema without fields
// (nothing put yet) knows no field to compare with: nil. This is the one rule by which
// a read naming a field is told to be probably misspelt; the Python SDK applies the same
// rule to the schema the server answers (GET D/schema).
func UnknownFields(schema Schema, fields []string) []string {
	if len(schema.Fields) == 0 {
		return nil
	}
	var unknown []string
	for _, f := range fields {
		if _, ok := schema.Kind(f); !ok && !slices.Contains(unknown, f) {
			unknown = append(unknown, f)
		}
	}
	return unknown
}

// tellUnknownFields runs before a batch hand-out of fields: it logs once per Queue and
// field, at level Warn, the fields of UnknownFields for the queue's schema. Such a
// hand-out is not refused — a consumer may start before the producer whose PutFields
// adds the field (field-level readiness) — but it hands out only records that have
// every field asked for, so it answers empty batches (waiting: ErrTimeout after the
// whole wait) until a put adds the field. The schema is read only while a name asked
// for is neither known nor told, and a failure to read it never fails the read (the
// read itself then says what is wrong). A name no record can have (CheckFieldNames) is
// not told: the hand-out refuses it as invalid.
//
// The fields the request's built-in sampler reads (SamplerFields) are told the same
// way, with what a sample without them becomes.
func (q *Queue) tellUnknownFields(ctx context.Context, req *MetaRequest) {
	fields := req.Fields
	if CheckFieldNames(fields) != nil {
		return
	}
	read := slices.DeleteFunc(SamplerFields(req.Sampler), func(sf SamplerField) bool {
		return CheckFieldNames([]string{sf.Field}) != nil // the hand-out refuses it
	})
	names := slices.Clone(fields)
	for _, sf := range read {
		names = append(names, sf.Field)
	}
	n := &q.fields
	n.mu.Lock()
	unresolved := n.unresolved(names)
	n.mu.Unlock()
	if len(unresolved) == 0 {
		return
	}
	schema, err := q.s.Schema(ctx)
	if err != nil {
		return
	}
	unknown := UnknownFields(schema, unresolved)
	var unknownRead []SamplerField
	for _, sf := range read {
		if slices.Contains(unknown, sf.Field) {
			unknownRead = append(unknownRead, sf)
		}
	}
	unknown = slices.DeleteFunc(unknown, func(f string) bool { return !slices.Contains(fields, f) })
	n.mu.Lock()
	if n.known == nil {
		n.known = make(map[string]struct{}, len(schema.Fields))
		n.told = make(map[string]struct{})
	}
	for _, f := range schema.Fields {
		n.known[f.Name] = struct{}{}
	}
	unknown = n.unresolved(unknown) // another read may have told them meanwhile
	unknownRead = slices.DeleteFunc(unknownRead, func(sf SamplerField) bool { return len(n.unresolved([]string{sf.Field})) == 0 })
	for _, f := range unknown {
		n.told[f] = struct{}{}
	}
	for _, sf := range unknownRead {
		n.told[sf.Field] = struct{}{}
	}
	n.mu.Unlock()
	queueFields := make([]string, len(schema.Fields))
	for i, f := range schema.Fields {
		queueFields[i] = f.Name
	}
	if len(unknownRead) > 0 {
		var what []string
		for _, sf := range unknownRead {
			what = append(what, fmt.Sprintf("%s=%q: %s", sf.Param, sf.Field, sf.Effect))
		}
		q.fields.logger().Warn("persist: the sampler reads fields that are in no record of the queue: "+
			strings.Join(what, "; ")+"; check the spelling",
			"queue", q.s.Name(), "sampler", req.Sampler.Name, "queue_fields", queueFields)
	}
	if len(unknown) == 0 {
		return
	}
	q.fields.logger().Warn("persist: a batch hands out only records that have every field asked for, "+
		"and these fields are in no record of the queue, so it stays empty until a put or PutFields adds them; check the spelling",
		"queue", q.s.Name(), "fields", unknown, "queue_fields", queueFields)
}

// unresolved returns the names of fields neither known nor told, each once. n.mu is held.
func (n *fieldNotices) unresolved(fields []string) []string {
	var out []string
	for _, f := range fields {
		_, known := n.known[f]
		_, told := n.told[f]
		if !known && !told && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// SamplerField is a field a built-in sampler reads, named by one of its parameters.
type SamplerField struct {
	Param  string // the parameter naming it: "group_field", "length_field", …
	Field  string // the field
	Effect string // what a sample without the field becomes, in words
}

// samplerFieldParams are the parameters of the built-in samplers that name a field the
// sampler reads (SampleInput.Values), with what a sample without it becomes.
var samplerFieldParams = map[string][][2]string{
	SamplerGRPOGroupN: {
		{"group_field", "a sample without it is in no group, so is never handed out"},
		{"drop_zero_variance", "a group with a sample without it is not judged (served)"},
		{"time_field", "a group without it is never judged a straggler"},
	},
	SamplerSeqLenBalanced: {{"length_field", "a sample without it counts length 0"}},
}

// SamplerFields returns the fields spec's sampler reads, named by its parameters, for
// the built-in samplers (GRPOGroupN's GroupField, DropZeroVariance and TimeField,
// SeqLenBalanced's LengthField); none for another sampler, whose parameters' meaning is
// its own, or for parameters that do not decode (the hand-out refuses those). A Reader
// warns once about such a field no record of the queue has (docs/persist.md, "A field a
// sampler reads that no record has"), as about a field asked for; the Python SDK applies
// the same table.
func SamplerFields(spec SamplerSpec) []SamplerField {
	params := samplerFieldParams[spec.Name]
	if len(params) == 0 || len(spec.Params) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(spec.Params, &m) != nil {
		return nil
	}
	var out []SamplerField
	for _, p := range params {
		if f, ok := m[p[0]].(string); ok && f != "" {
			out = append(out, SamplerField{Param: p[0], Field: f, Effect: p[1]})
		}
	}
	return out
}

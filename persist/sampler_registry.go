package persist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Names of the built-in samplers (SamplerSpec.Name).
const (
	SamplerSequential     = "sequential"      // Sequential; no parameters
	SamplerRankAware      = "rank-aware"      // RankAware; no parameters
	SamplerGRPOGroupN     = "grpo-group-n"    // GRPOGroupN: {"n": 4, "group_field": "uid"}
	SamplerSeqLenBalanced = "seqlen-balanced" // SeqLenBalanced: {"length_field": "tokens", "groups": 2}
)

// SamplerSpec chooses the sampler of a GetMeta by name and parameters, so that a
// request can cross a network and a store can run the sampler where the consumption
// state is (inside its transaction). The zero value means Sequential. Build one from
// the typed parameters, e.g. GRPOGroupN{N: 4}.Spec(); Params is their JSON encoding.
type SamplerSpec struct {
	// Name is a sampler name of the store's Samplers: SamplerSequential, SamplerRankAware,
	// SamplerGRPOGroupN, SamplerSeqLenBalanced, or one added with Samplers.With.
	// "" means SamplerSequential.
	Name string `json:"name"`
	// Params are the sampler's parameters as a JSON object; empty means none. Unknown
	// parameters are refused.
	Params json.RawMessage `json:"params,omitempty"`
}

// SamplerFactory builds a Sampler from its JSON parameters (nil when none were
// given). It returns *InvalidError for parameters outside what the sampler allows.
type SamplerFactory func(params json.RawMessage) (Sampler, error)

// Samplers is a set of samplers by name: the samplers a store runs for GetMeta
// (SamplerSpec.Name). It is a value, carried in the store's configuration
// (Config.Samplers, lakestore.Config.Samplers); the zero value means DefaultSamplers.
// A Samplers is never changed in place: With returns a new set, so one set may be
// shared by any number of stores and goroutines.
type Samplers struct {
	byName map[string]SamplerFactory
}

// DefaultSamplers returns the built-in samplers: SamplerSequential, SamplerRankAware,
// SamplerGRPOGroupN and SamplerSeqLenBalanced.
func DefaultSamplers() Samplers {
	return Samplers{byName: map[string]SamplerFactory{
		SamplerSequential: func(p json.RawMessage) (Sampler, error) {
			var s Sequential
			return s, DecodeSamplerParams(SamplerSequential, p, &s)
		},
		SamplerRankAware: func(p json.RawMessage) (Sampler, error) {
			var s RankAware
			return s, DecodeSamplerParams(SamplerRankAware, p, &s)
		},
		SamplerGRPOGroupN: func(p json.RawMessage) (Sampler, error) {
			var g GRPOGroupN
			if err := DecodeSamplerParams(SamplerGRPOGroupN, p, &g); err != nil {
				return nil, err
			}
			return g, g.validate()
		},
		SamplerSeqLenBalanced: func(p json.RawMessage) (Sampler, error) {
			var s SeqLenBalanced
			if err := DecodeSamplerParams(SamplerSeqLenBalanced, p, &s); err != nil {
				return nil, err
			}
			return s, s.validate()
		},
	}}
}

// orDefault returns s, or DefaultSamplers for the zero value.
func (s Samplers) orDefault() Samplers {
	if s.byName == nil {
		return DefaultSamplers()
	}
	return s
}

// With returns the set s plus the sampler name built by build (a store runs the
// samplers of its own configuration: give a custom sampler to the server's stores to
// use it over the network). name follows the partition name rule. Errors:
// *InvalidError for a bad name, a name s already has, or a nil factory.
func (s Samplers) With(name string, build SamplerFactory) (Samplers, error) {
	s = s.orDefault()
	if err := CheckName("sampler name", name); err != nil {
		return s, err
	}
	if build == nil {
		return s, &InvalidError{Field: "sampler factory", Value: nil, Rule: "a function"}
	}
	if _, dup := s.byName[name]; dup {
		return s, &InvalidError{Field: "sampler name", Value: name, Rule: "a name not in the set yet"}
	}
	out := make(map[string]SamplerFactory, len(s.byName)+1)
	maps.Copy(out, s.byName)
	out[name] = build
	return Samplers{byName: out}, nil
}

// Names returns the names of the samplers of s, sorted.
func (s Samplers) Names() []string {
	return slices.Sorted(maps.Keys(s.orDefault().byName))
}

// New builds the sampler spec names. Errors: *InvalidError for a name s does not have
// or parameters the sampler refuses (unknown, of the wrong type, out of range).
func (s Samplers) New(spec SamplerSpec) (Sampler, error) {
	s = s.orDefault()
	name := spec.Name
	if name == "" {
		name = SamplerSequential
	}
	build := s.byName[name]
	if build == nil {
		return nil, &InvalidError{Field: "sampler", Value: name,
			Rule: "a registered sampler name: " + strings.Join(s.Names(), ", ")}
	}
	var params json.RawMessage
	if p := bytes.TrimSpace(spec.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		params = p
	}
	return build(params)
}

// DecodeSamplerParams decodes params strictly into dst (a pointer to the sampler's
// parameter struct), for SamplerFactory implementations: unknown fields and wrong
// types fail with *InvalidError naming the sampler. nil params leave dst as it is.
func DecodeSamplerParams(sampler string, params json.RawMessage, dst any) error {
	if params == nil {
		return nil
	}
	bad := func(problem string) error {
		return &InvalidError{Field: "sampler " + sampler + " parameters", Value: string(params),
			Rule: "a JSON object of the sampler's parameters (" + problem + ")"}
	}
	if key, ok := duplicateKey(params); ok {
		return bad(fmt.Sprintf("parameter %q is given twice", key))
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bad(jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data follows the object")
	}
	return nil
}

// duplicateKey returns a key that params, a JSON object, has twice (the HTTP API
// refuses such objects, and encoding/json would silently keep the last).
func duplicateKey(params json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(params))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false // not an object: Decode says so
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := t.(string)
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// jsonProblem describes a decoding error in JSON terms.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "got a JSON " + te.Value + ", not an object"
		}
		if strings.HasPrefix(te.Value, "number") && isIntKind(te.Type.Kind()) {
			// A number with a fraction or an exponent (2.0, 1e2) or beyond the parameter's
			// range: an integer parameter is read strictly, never truncated or rounded.
			return fmt.Sprintf("%s must be an integer (digits, no fraction or exponent) within its range, got %s", te.Field, te.Value)
		}
		return fmt.Sprintf("%s must be a JSON %s", te.Field, jsonKind(te.Type.Kind().String()))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// isIntKind reports whether k is an integer kind.
func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "float64":
		return "number"
	case "string":
		return "string"
	case "bool":
		return "boolean"
	}
	return "value of another type"
}

// spec encodes typed parameters as a SamplerSpec.
func spec(name string, params any) SamplerSpec {
	b, err := json.Marshal(params)
	if err != nil || bytes.Equal(b, []byte("{}")) {
		return SamplerSpec{Name: name}
	}
	return SamplerSpec{Name: name, Params: b}
}

// Spec returns the SamplerSpec of Sequential.
func (Sequential) Spec() SamplerSpec { return SamplerSpec{Name: SamplerSequential} }

// Spec returns the SamplerSpec of RankAware.
func (RankAware) Spec() SamplerSpec { return SamplerSpec{Name: SamplerRankAware} }

// Spec returns the SamplerSpec of g.
func (g GRPOGroupN) Spec() SamplerSpec { return spec(SamplerGRPOGroupN, g) }

// Spec returns the SamplerSpec of s.
func (s SeqLenBalanced) Spec() SamplerSpec { return spec(SamplerSeqLenBalanced, s) }

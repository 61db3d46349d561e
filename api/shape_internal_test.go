package api

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeRequestLikeGenerated: a msgpack request body decodes to what the msgp-generated
// decoder (which reads answers) makes of it, and a body refused as out of range is one the
// generated decoder refuses too. Fields of type any hold the generic form instead, so the
// bodies that have one are only checked for being accepted by both.
func FuzzDecodeRequestLikeGenerated(f *testing.F) {
	seeds := []any{
		&SubmitRequest{Payload: Value{Wire: []byte{0x01}}, Key: "k", Metadata: map[string]string{"a": "b"}, Deadline: time.Unix(5, 7)},
		&SubmitBatchRequest{Invocations: []SubmitInvocation{{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Priority: 1.5}}},
		&ClaimRequest{Kind: "fifo", Max: 8, Wait: 1},
		&SettlesRequest{Settles: []Settle{{ID: "x", Token: "t", Outcome: "succeeded", Result: Value{Wire: []byte{0xc0}}, Error: &ErrorInfo{Type: "e"}}}},
		&DataMetaRequest{Fields: []string{}, Sampler: &DataSampler{Name: "x", Params: map[string]any{"a": int64(1)}}},
		&DataKVPutRequest{Keys: []string{"a"}, Records: []Value{{Wire: []byte{}}}, Tags: []map[string]string{{}}},
		&TokenCreateRequest{Namespace: "*", Hash: []byte{}, Permissions: []string{}},
		&Provider{Name: "local", Policy: LaunchPolicy{Command: []string{"a"}, Env: map[string]string{}}},
		&ErrorBody{Code: "x", Details: &ErrorDetails{Value: "v"}},
		&WaitResponse{Done: true, Invocation: &Invocation{ID: "x"}},
	}
	for _, s := range seeds {
		b, err := Msgpack.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range []any{new(SubmitRequest), new(SubmitBatchRequest), new(ClaimRequest), new(SettlesRequest), new(DataMetaRequest),
			new(DataKVPutRequest), new(TokenCreateRequest), new(Provider), new(WaitResponse), new(ErrorBody), new(DataGetRequest), new(HeartbeatsRequest)} {
			typ := reflect.TypeOf(s).Elem()
			a := reflect.New(typ).Interface()
			b := reflect.New(typ).Interface().(Body)
			errA := Msgpack.UnmarshalRequest(data, a)
			if errA != nil {
				if late := errA.Error(); strings.Contains(late, "each of the kind") || strings.Contains(late, "the number is out of range") ||
					strings.Contains(late, "elements") {
					if _, errB := b.UnmarshalMsg(data); errB == nil {
						t.Fatalf("%T: UnmarshalRequest refuses a value as out of range, the generated decoder takes it: %v", s, errA)
					}
				}
				continue
			}
			_, errB := b.UnmarshalMsg(data)
			if errB != nil {
				t.Fatalf("%T: UnmarshalRequest accepts, the generated decoder refuses: %v", s, errB)
			}
			if typ.Name() == "DataMetaRequest" || typ.Name() == "ErrorBody" {
				continue // a field of type any: the generic form, not msgp's
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%T: UnmarshalRequest and the generated decoder differ\n%#v\n%#v", s, a, b)
			}
		}
	})
}

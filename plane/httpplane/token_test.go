package httpplane_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// TestNewRefusesAMalformedToken: a token no Authorization header carries (a newline in
// it) is *plane.InvalidError naming the token, from New, before any request, and the
// message never holds the token; it was a transport error retried as "plane unavailable".
func TestNewRefusesAMalformedToken(t *testing.T) {
	for _, token := range []string{"s3cr3t\n", "s3cr3t\r\nx", "s3\x7fcr3t"} {
		_, err := httpplane.New("http://127.0.0.1:1", &httpplane.Config{Token: token})
		var invalid *plane.InvalidError
		if !errors.As(err, &invalid) || invalid.Field != "token" {
			t.Fatalf("token %q: %v, want an invalid token", token, err)
		}
		if strings.Contains(err.Error(), "s3") {
			t.Fatalf("token %q: the message shows the token: %v", token, err)
		}
	}
	if _, err := httpplane.New("http://127.0.0.1:1", &httpplane.Config{Token: "ok-token_1.2"}); err != nil {
		t.Fatalf("a well-formed token: %v", err)
	}
}

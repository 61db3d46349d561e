package plane

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTokenRuleSameInPython: the Python SDK refuses a token with the same rule text as
// ValidateToken (python/src/lakeshore/dispatch.py, TOKEN_RULE), so a user reads one sentence
// whichever client refused the token. The Python constant is adjacent string literals in
// parentheses; their concatenation must equal TokenRule.
func TestTokenRuleSameInPython(t *testing.T) {
	src, err := os.ReadFile("../python/src/lakeshore/dispatch.py")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)\nTOKEN_RULE = \((.*?)\n\)`).FindSubmatch(src)
	if block == nil {
		t.Fatal("TOKEN_RULE = ( … ) not found in python/src/lakeshore/dispatch.py")
	}
	var python strings.Builder
	for _, m := range regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`).FindAllSubmatch(block[1], -1) {
		python.Write(m[1])
	}
	if python.String() != TokenRule {
		t.Fatalf("Python's TOKEN_RULE differs from plane.TokenRule:\npython: %q\ngo:     %q", python.String(), TokenRule)
	}
}

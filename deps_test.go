package lakeshore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRootPackageDependencies keeps the SDK's import graph small: the blob-store scopes
// (gocloud.dev/blob, and through it gRPC and OpenTelemetry) live in package scope, and the
// root package must not link them again.
func TestRootPackageDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, banned := range []string{"google.golang.org/grpc", "go.opentelemetry.io", "gocloud.dev"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the root package depends on %s; keep it out of the SDK's import graph", dep)
			}
		}
	}
}

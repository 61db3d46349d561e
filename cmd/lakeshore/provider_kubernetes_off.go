//go:build !lakeshore_kubernetes

package main

import (
	"fmt"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// kubernetesBuilt reports whether this binary has the Kubernetes provider.
const kubernetesBuilt = false

// newKubernetesProvider in a build without the Kubernetes provider: the default build
// leaves client-go out (it would double the binary and its build time).
func newKubernetesProvider(file string, decl *fabric.Provider) (provider.Provider, error) {
	return nil, provider.UnknownProvider(fmt.Errorf("%s:%d: provider %q is of type kubernetes, and this lakeshore was built without the Kubernetes provider: "+
		"build it with `go build -tags lakeshore_kubernetes ./cmd/lakeshore` (docs/providers.md)", file, decl.Line, decl.Name))
}

//go:build lakeshore_kubernetes

package main

import (
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/kubeprovider"
)

// kubernetesBuilt reports whether this binary has the Kubernetes provider.
const kubernetesBuilt = true

// newKubernetesProvider makes the kubernetes provider declared as decl in file, with a
// client of the cluster its kubeconfig option names (in-cluster, $KUBECONFIG or
// ~/.kube/config when unset).
func newKubernetesProvider(file string, decl *fabric.Provider) (provider.Provider, error) {
	cfg, kubeconfig, err := kubeprovider.FromConfig(file, decl)
	if err != nil {
		return nil, err
	}
	client, err := kubeprovider.NewClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubeprovider.New(cfg, client)
}

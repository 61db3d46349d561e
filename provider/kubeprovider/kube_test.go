//go:build lakeshore_kubernetes

// The tests run against client-go's fake clientset (k8s.io/client-go/kubernetes/fake), an
// in-memory object store behind the real typed client, not a live API server: no
// scheduler or kubelet runs the Pods, so a test sets a Pod's phase itself as a node
// would. docs/providers.md says why.
package kubeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/kubeprovider"
)

func newProvider(t *testing.T, client *fake.Clientset, mod func(*kubeprovider.Config)) *kubeprovider.Provider {
	t.Helper()
	cfg := kubeprovider.Config{Name: "gpu", Namespace: "ml", Image: "registry.example/lakeshore:1", Lakeshore: "/usr/local/bin/lakeshore",
		NodeSelector: map[string]string{"cloud.example/pool": "gpu"}, Secret: "lakeshore-token", ServiceAccount: "workers"}
	if mod != nil {
		mod(&cfg)
	}
	p, err := kubeprovider.New(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func launch(id string, res plane.Resources) *provider.Launch {
	return &provider.Launch{ID: id, Namespace: "team", Queue: "train", Resources: res,
		Command: []string{"lakeshore", "worker", "train", "--", "python", "train.py"},
		Env: map[string]string{"LAKESHORE_URL": "https://plane.example:7077", "LAKESHORE_TOKEN": "s3cr3t", "B": "2", "A": "1",
			provider.EnvQueue: "train"}}
}

// TestPodManifest: the Pod a launch creates — labels for adoption, the queue in
// annotations, GPUs as nvidia.com/gpu requests and limits, CPUs and memory, node selectors
// from the config and the partition, the time limit as activeDeadlineSeconds, the command
// with the image's lakeshore, the environment sorted, and the token from the Secret, never
// in the spec.
func TestPodManifest(t *testing.T) {
	client := fake.NewClientset()
	p := newProvider(t, client, nil)
	ctx := context.Background()
	l := launch("01JABCDEF", plane.Resources{CPUs: 8, GPUs: 2, MemoryMB: 65536, TimeLimit: 90*time.Minute + time.Millisecond, Partition: "a100"})
	if err := p.Launch(ctx, l); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("ml").Get(ctx, "lakeshore-01jabcdef", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Pod: %v", err)
	}
	wantLabels := map[string]string{"app.kubernetes.io/managed-by": "lakeshore", "lakeshore.dev/provider": "gpu", "lakeshore.dev/launch": "01JABCDEF"}
	for k, v := range wantLabels {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Annotations["lakeshore.dev/namespace"] != "team" || pod.Annotations["lakeshore.dev/queue"] != "train" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	s := pod.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || s.ServiceAccountName != "workers" || s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 5401 {
		t.Errorf("spec: restart %s, account %q, deadline %v", s.RestartPolicy, s.ServiceAccountName, s.ActiveDeadlineSeconds)
	}
	if len(s.NodeSelector) != 2 || s.NodeSelector["cloud.example/pool"] != "gpu" || s.NodeSelector["lakeshore.dev/pool"] != "a100" {
		t.Errorf("node selector %v", s.NodeSelector)
	}
	if len(s.Containers) != 1 {
		t.Fatalf("containers %v", s.Containers)
	}
	c := s.Containers[0]
	if c.Name != "worker" || c.Image != "registry.example/lakeshore:1" ||
		strings.Join(c.Command, " ") != "/usr/local/bin/lakeshore worker train -- python train.py" {
		t.Errorf("container %s %s %v", c.Name, c.Image, c.Command)
	}
	gpu := corev1.ResourceName("nvidia.com/gpu")
	for _, tc := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		{c.Resources.Requests, corev1.ResourceCPU, "8"}, {c.Resources.Requests, corev1.ResourceMemory, "64Gi"},
		{c.Resources.Limits, corev1.ResourceMemory, "64Gi"}, {c.Resources.Requests, gpu, "2"}, {c.Resources.Limits, gpu, "2"},
	} {
		q, ok := tc.list[tc.name]
		if !ok || q.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s = %v, want %s (requests %v, limits %v)", tc.name, q.String(), tc.want, c.Resources.Requests, c.Resources.Limits)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit: the worker would be throttled; only a request is set")
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name+"="+e.Value+envSource(e))
		if strings.Contains(e.Value, "s3cr3t") {
			t.Errorf("the Pod spec holds the token in %s", e.Name)
		}
	}
	// the policy's env from the launch's Secret; the token from the operator's (envFrom)
	if got := strings.Join(names, " "); got != "A=<lakeshore-01jabcdef/A> B=<lakeshore-01jabcdef/B> LAKESHORE_LAUNCH_ID=01JABCDEF LAKESHORE_QUEUE=train LAKESHORE_URL=https://plane.example:7077" {
		t.Errorf("env = %s", got)
	}
	secret, err := client.CoreV1().Secrets("ml").Get(ctx, "lakeshore-01jabcdef", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the launch's Secret: %v", err)
	}
	if len(secret.Data) != 2 || string(secret.Data["A"]) != "1" || string(secret.Data["B"]) != "2" {
		t.Errorf("the launch's Secret holds %v; want A=1 B=2 (the token comes from the operator's Secret)", secret.Data)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "lakeshore-token" {
		t.Errorf("envFrom = %+v, want the Secret lakeshore-token", c.EnvFrom)
	}

	// A launch asking nothing: no resources, only the config's selector.
	if err := p.Launch(ctx, launch("01JPLAIN", plane.Resources{})); err != nil {
		t.Fatal(err)
	}
	plain, _ := client.CoreV1().Pods("ml").Get(ctx, "lakeshore-01jplain", metav1.GetOptions{})
	if r := plain.Spec.Containers[0].Resources; r.Requests != nil || r.Limits != nil || len(plain.Spec.NodeSelector) != 1 || plain.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("a launch asking nothing: resources %+v, selector %v", r, plain.Spec.NodeSelector)
	}
}

// envSource is how a Pod's variable gets its value from a Secret: "<SECRET/KEY>", or "".
func envSource(e corev1.EnvVar) string {
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		return ""
	}
	return "<" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key + ">"
}

// withUIDs makes the fake API server give each Pod it creates a UID, as a real one does
// (an ownerReference names its owner by UID).
func withUIDs(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.UID = types.UID("uid-" + pod.Name)
		return false, nil, nil
	})
}

// TestSecretsStayOutOfPodSpecs: without the operator's Secret, a launch's token, plane URL
// with a password and policy env (HF_TOKEN, AWS_SECRET_ACCESS_KEY, any other variable) are
// not in the Pod spec: each is a secretKeyRef to the launch's own Secret, which holds the
// values and is owned by the Pod (garbage-collected with it); only the variables that
// describe the launch are in clear. A Secret the API server refuses leaves no Pod, and its
// error holds no value.
func TestSecretsStayOutOfPodSpecs(t *testing.T) {
	client := fake.NewClientset()
	withUIDs(client)
	p := newProvider(t, client, func(c *kubeprovider.Config) { c.Secret = "" })
	ctx := context.Background()
	l := launch("01JTOKEN", plane.Resources{})
	l.Env["LAKESHORE_URL"] = "postgres://lake:hunter2@db.internal/jobs"
	l.Env["HF_TOKEN"] = "hf_abcdefsecret"
	l.Env["AWS_SECRET_ACCESS_KEY"] = "awssecretvalue"
	l.Env["AZURE_STORAGE_CONNECTION_STRING"] = "AccountKey=azuresecretvalue"
	if err := p.Launch(ctx, l); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("ml").Get(ctx, "lakeshore-01jtoken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"s3cr3t", "hunter2", "hf_abcdefsecret", "awssecretvalue", "azuresecretvalue"} {
		if strings.Contains(string(spec), value) {
			t.Errorf("the Pod holds %q in clear: %s", value, spec)
		}
	}
	var names []string
	for _, e := range pod.Spec.Containers[0].Env {
		names = append(names, e.Name+"="+e.Value+envSource(e))
	}
	want := "A=<lakeshore-01jtoken/A> AWS_SECRET_ACCESS_KEY=<lakeshore-01jtoken/AWS_SECRET_ACCESS_KEY> " +
		"AZURE_STORAGE_CONNECTION_STRING=<lakeshore-01jtoken/AZURE_STORAGE_CONNECTION_STRING> B=<lakeshore-01jtoken/B> " +
		"HF_TOKEN=<lakeshore-01jtoken/HF_TOKEN> LAKESHORE_LAUNCH_ID=01JTOKEN LAKESHORE_QUEUE=train " +
		"LAKESHORE_TOKEN=<lakeshore-01jtoken/LAKESHORE_TOKEN> LAKESHORE_URL=<lakeshore-01jtoken/LAKESHORE_URL>"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("env = %s\nwant  %s", got, want)
	}
	if len(pod.Spec.Containers[0].EnvFrom) != 0 {
		t.Errorf("envFrom %v without the operator's Secret", pod.Spec.Containers[0].EnvFrom)
	}
	secret, err := client.CoreV1().Secrets("ml").Get(ctx, "lakeshore-01jtoken", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the launch's Secret: %v", err)
	}
	wantData := map[string]string{"A": "1", "B": "2", "LAKESHORE_TOKEN": "s3cr3t", "LAKESHORE_URL": "postgres://lake:hunter2@db.internal/jobs",
		"HF_TOKEN": "hf_abcdefsecret", "AWS_SECRET_ACCESS_KEY": "awssecretvalue", "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=azuresecretvalue"}
	gotData := map[string]string{}
	for k, v := range secret.Data {
		gotData[k] = string(v)
	}
	if !maps.Equal(gotData, wantData) {
		t.Errorf("the Secret holds %v; want %v", gotData, wantData)
	}
	if secret.Immutable == nil || !*secret.Immutable || secret.Type != corev1.SecretTypeOpaque || secret.Labels["lakeshore.dev/launch"] != "01JTOKEN" {
		t.Errorf("Secret immutable %v, type %s, labels %v", secret.Immutable, secret.Type, secret.Labels)
	}
	owners := secret.OwnerReferences
	if len(owners) != 1 || owners[0].APIVersion != "v1" || owners[0].Kind != "Pod" || owners[0].Name != pod.Name || owners[0].UID != pod.UID || pod.UID == "" {
		t.Errorf("the Secret's owners %+v; want the Pod %s (UID %s), so it is garbage-collected with it", owners, pod.Name, pod.UID)
	}

	// The API server refuses the Secret: no Pod is left, and the error holds no value.
	client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`secrets is forbidden: User "system:serviceaccount:ml:default" cannot create resource "secrets"`)
	})
	err = p.Launch(ctx, launch("01JNOSECRET", plane.Resources{}))
	if err == nil || !strings.Contains(err.Error(), "create Secret ml/lakeshore-01jnosecret") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a refused Secret: %v", err)
	}
	if _, err := client.CoreV1().Pods("ml").Get(ctx, "lakeshore-01jnosecret", metav1.GetOptions{}); err == nil {
		t.Error("the Pod of a launch whose Secret was refused is left")
	}
}

func setPhase(t *testing.T, client *fake.Clientset, name string, phase corev1.PodPhase) {
	t.Helper()
	pods := client.CoreV1().Pods("ml")
	pod, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	pod.Spec.NodeName = "node-1"
	if _, err := pods.UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestListAdoptStop: List maps Pod phases to launch states and drops (and deletes) ended
// Pods; a provider made later (a restarted supervisor) lists the Pods of the one before
// by their labels, not other providers' Pods; Stop deletes the Pod with the grace as its
// termination grace period, and stopping a Pod that is gone is not an error.
func TestListAdoptStop(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	first := newProvider(t, client, nil)
	for _, id := range []string{"01JPEND", "01JRUN", "01JDONE", "01JFAIL"} {
		if err := first.Launch(ctx, launch(id, plane.Resources{GPUs: 1})); err != nil {
			t.Fatal(err)
		}
	}
	other := newProvider(t, client, func(c *kubeprovider.Config) { c.Name = "cpu" })
	if err := other.Launch(ctx, launch("01JOTHER", plane.Resources{})); err != nil {
		t.Fatal(err)
	}
	setPhase(t, client, "lakeshore-01jrun", corev1.PodRunning)
	setPhase(t, client, "lakeshore-01jdone", corev1.PodSucceeded)
	setPhase(t, client, "lakeshore-01jfail", corev1.PodFailed)

	restarted := newProvider(t, client, nil) // a supervisor started later
	ls, err := restarted.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]provider.LaunchStatus{}
	for _, l := range ls {
		got[l.ID] = l
	}
	if len(got) != 2 || got["01JPEND"].State != provider.LaunchPending || got["01JRUN"].State != provider.LaunchRunning ||
		got["01JRUN"].Queue != "train" || got["01JRUN"].Namespace != "team" || !strings.Contains(got["01JRUN"].Detail, "on node-1") {
		t.Fatalf("List = %+v, want the pending and the running Pod of this provider", got)
	}
	for _, gone := range []string{"lakeshore-01jdone", "lakeshore-01jfail"} {
		if _, err := client.CoreV1().Pods("ml").Get(ctx, gone, metav1.GetOptions{}); err == nil {
			t.Errorf("the ended Pod %s was not deleted", gone)
		}
	}

	client.ClearActions()
	if err := restarted.Stop(ctx, "01JRUN", 45*time.Second); err != nil {
		t.Fatal(err)
	}
	var graced bool
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.Name == "lakeshore-01jrun" {
			graced = d.DeleteOptions.GracePeriodSeconds != nil && *d.DeleteOptions.GracePeriodSeconds == 45
		}
	}
	if !graced {
		t.Errorf("Stop did not delete the Pod with a 45 s grace period: %v", client.Actions())
	}
	if err := restarted.Stop(ctx, "01JRUN", time.Second); err != nil {
		t.Errorf("Stop of a Pod that is gone: %v", err)
	}
	if ls, _ := restarted.List(ctx); len(ls) != 1 || ls[0].ID != "01JPEND" {
		t.Errorf("List after Stop = %+v", ls)
	}
	if ls, _ := other.List(ctx); len(ls) != 1 || ls[0].ID != "01JOTHER" {
		t.Errorf("the other provider's List = %+v", ls)
	}
}

// TestAPIErrors: the API server's refusals come back as errors naming the Pod and the
// namespace; Check says what the supervisor's account must be allowed.
func TestAPIErrors(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`pods is forbidden: User "system:serviceaccount:ml:default" cannot create resource "pods"`)
	})
	p := newProvider(t, client, nil)
	ctx := context.Background()
	if err := p.Launch(ctx, launch("01JX", plane.Resources{})); err == nil || !strings.Contains(err.Error(), "create Pod ml/lakeshore-01jx") ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Launch refused: %v", err)
	}
	if err := p.Check(ctx); err == nil || !strings.Contains(err.Error(), "may the supervisor's account create, list and delete Pods") {
		t.Errorf("Check refused: %v", err)
	}
}

// TestFromConfig reads a kubernetes provider from a project file.
func TestFromConfig(t *testing.T) {
	c, err := fabric.Parse("lakeshore.yaml", []byte(`providers:
  k8s:
    type: kubernetes
    namespace: ml
    image: registry.example/lakeshore:1
    node_selector: "cloud.example/pool=gpu, zone=b"
    secret: lakeshore-token
    kubeconfig: /etc/lakeshore/kubeconfig
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, kubeconfig, err := kubeprovider.FromConfig(c.File, c.Providers["k8s"])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "ml" || cfg.Image != "registry.example/lakeshore:1" || cfg.NodeSelector["zone"] != "b" ||
		cfg.NodeSelector["cloud.example/pool"] != "gpu" || cfg.Secret != "lakeshore-token" || kubeconfig != "/etc/lakeshore/kubeconfig" {
		t.Errorf("config %+v, kubeconfig %q", cfg, kubeconfig)
	}
	for _, tc := range []struct{ yaml, field, contains string }{
		{"providers:\n  k:\n    type: kubernetes\n", "providers.k.image", "missing"},
		{"providers:\n  k:\n    type: kubernetes\n    image: x\n    namespac: ml\n", "providers.k.namespac", `unknown key "namespac"`},
		{"providers:\n  k:\n    type: kubernetes\n    image: x\n    namespace: ML_Team\n", "providers.k", "bad namespace"},
		{"providers:\n  k:\n    type: kubernetes\n    image: x\n    node_selector: gpu\n", "providers.k.node_selector", "want key=value"},
	} {
		c, err := fabric.Parse("lakeshore.yaml", []byte(tc.yaml))
		if err == nil {
			_, _, err = kubeprovider.FromConfig(c.File, c.Providers["k"])
		}
		var ce *fabric.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Message, tc.contains) {
			t.Errorf("%q: %v, want field %s containing %q", tc.yaml, err, tc.field, tc.contains)
		}
	}
}

// TestDocsProvider: the provider shown in docs/providers.md reads as it says.
func TestDocsProvider(t *testing.T) {
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		if b, _, _ := strings.Cut(part, "```"); strings.Contains(b, "type: kubernetes\n") {
			block = b
		}
	}
	c, err := fabric.Parse("docs/providers.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	cfg, kubeconfig, err := kubeprovider.FromConfig(c.File, c.Providers["k8s"])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Image != "registry.example/lakeshore-worker:1" || cfg.Namespace != "ml" || cfg.Secret != "lakeshore-token" ||
		cfg.NodeSelector["cloud.example/pool"] != "gpu" || kubeconfig != "" {
		t.Errorf("the documented provider reads as %+v", cfg)
	}
}

// TestPodManifestShape: a launch for a shape asks its requirement in the Pod — millicpus as
// the CPU request, memory as request and limit, GPUs as nvidia.com/gpu request and limit,
// in place of the policy's — selects nodes by its GPU type (GPUTypeLabel) and labels,
// carries its shape as a label, and List gives the shape back; a label that is not a node
// label cannot be offered.
func TestPodManifestShape(t *testing.T) {
	client := fake.NewClientset()
	p := newProvider(t, client, nil)
	ctx := context.Background()
	req := &plane.Requirement{MilliCPUs: 1500, MemoryBytes: 40 << 30, GPUs: 4, GPUType: "a100", Labels: map[string]string{"zone": "east"}}
	l := launch("01JSHAPE", plane.Resources{CPUs: 1, GPUs: 1, MemoryMB: 1024})
	l.Shape, l.Requirement = req.Shape(), req
	pod, err := p.Pod(l)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	gpu := corev1.ResourceName(kubeprovider.GPUResourceDefault)
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.String() != "1500m" {
		t.Errorf("cpu request %s; want 1500m", got.String())
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.Value() != 40<<30 {
		t.Errorf("memory limit %s; want 40Gi", got.String())
	}
	if r, l := c.Resources.Requests[gpu], c.Resources.Limits[gpu]; r.Value() != 4 || l.Value() != 4 {
		t.Errorf("gpu request/limit %s/%s; want 4/4", r.String(), l.String())
	}
	want := map[string]string{"cloud.example/pool": "gpu", kubeprovider.GPUTypeLabelDefault: "a100", "zone": "east"}
	if !maps.Equal(pod.Spec.NodeSelector, want) {
		t.Errorf("node selector %v; want %v", pod.Spec.NodeSelector, want)
	}
	if pod.Labels[kubeprovider.LabelShape] != req.Shape() {
		t.Errorf("labels %v; want %s=%s", pod.Labels, kubeprovider.LabelShape, req.Shape())
	}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatal(err)
	}
	ls, err := p.List(ctx)
	if err != nil || len(ls) != 1 || ls[0].Shape != req.Shape() {
		t.Errorf("List = %+v, %v; want the launch with shape %s", ls, err, req.Shape())
	}
	if err := p.CanOffer(&plane.Requirement{Labels: map[string]string{"zone": "east west"}}); err == nil {
		t.Error("CanOffer of a label value with a space: nil; want an error")
	}
}

// TestShapeLabelsCannotReplaceTheOperatorsSelector: a shape's labels are the submitter's
// (`submit --requires label.KEY=VALUE`); the provider's node_selector, gpu_type label and
// partition label are the operator's. Before, the shape's labels were copied over the
// selector, so a tenant's label cloud.example/pool=system moved its worker off the
// operator's pool=gpu onto any node pool, and a label of the GPU-type key replaced the
// shape's own gpu_type. Now such a shape cannot be offered, and its Pod is not made.
func TestShapeLabelsCannotReplaceTheOperatorsSelector(t *testing.T) {
	p := newProvider(t, fake.NewClientset(), func(c *kubeprovider.Config) { c.PartitionLabel = "cloud.example/partition" })
	for _, req := range []*plane.Requirement{
		{Labels: map[string]string{"cloud.example/pool": "system"}},
		{GPUType: "a100", Labels: map[string]string{kubeprovider.GPUTypeLabelDefault: "t4"}},
		{Labels: map[string]string{kubeprovider.GPUTypeLabelDefault: "t4"}},
		{Labels: map[string]string{"cloud.example/partition": "other"}},
	} {
		if err := p.CanOffer(req); err == nil {
			t.Errorf("CanOffer(%v): nil; want an error", req.Labels)
		}
		l := launch("01JLABEL", plane.Resources{CPUs: 1, Partition: "main"})
		l.Shape, l.Requirement = req.Shape(), req
		if pod, err := p.Pod(l); err == nil {
			t.Errorf("Pod(%v): node selector %v; want an error", req.Labels, pod.Spec.NodeSelector)
		}
	}
	// The operator's own value, asked again, is no conflict.
	if err := p.CanOffer(&plane.Requirement{Labels: map[string]string{"cloud.example/pool": "gpu"}}); err != nil {
		t.Errorf("CanOffer(pool=gpu): %v", err)
	}
}

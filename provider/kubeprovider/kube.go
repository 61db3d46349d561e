//go:build lakeshore_kubernetes

// Package kubeprovider is the "kubernetes:NAME" provider: each worker is one Pod, created
// through the Kubernetes API with client-go, with the launch's GPUs as nvidia.com/gpu
// requests and limits, its CPUs and memory as requests (memory also as a limit), and node
// selectors from the provider's configuration and the launch's partition.
//
// The Pods are the state: each carries labels naming the provider and the launch, so a
// supervisor started later lists them (List) and adopts the workers an earlier one
// launched. Stop deletes the Pod with the grace as its termination grace period: the
// kubelet sends the worker SIGTERM (a Lakeshore worker drains) and SIGKILL after it.
//
// The package is built only with the build tag lakeshore_kubernetes (client-go roughly
// doubles the lakeshore binary and its build time); the default lakeshore binary refuses a
// kubernetes provider with the command that builds one with it. docs/providers.md says
// what is tested and how.
package kubeprovider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// Labels and annotations every worker Pod carries.
const (
	// LabelManagedBy is "app.kubernetes.io/managed-by": "lakeshore".
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelProvider is the declared provider's name: a supervisor lists (and adopts) the
	// Pods with its provider's name.
	LabelProvider = "lakeshore.dev/provider"
	// LabelLaunch is the launch id.
	LabelLaunch = "lakeshore.dev/launch"
	// LabelShape is the shape key of a launch for a shape (absent for the default shape):
	// a supervisor started later counts an adopted Pod under it.
	LabelShape = "lakeshore.dev/shape"
	// AnnotationNamespace and AnnotationQueue are the queue the worker serves (annotations:
	// a queue name need not be a valid label value).
	AnnotationNamespace = "lakeshore.dev/namespace"
	AnnotationQueue     = "lakeshore.dev/queue"
)

// Defaults of Config.
const (
	// NamespaceDefault is Config.Namespace when "".
	NamespaceDefault = "default"
	// LakeshoreDefault is Config.Lakeshore when "".
	LakeshoreDefault = "lakeshore"
	// GPUResourceDefault is Config.GPUResource when "".
	GPUResourceDefault = "nvidia.com/gpu"
	// PartitionLabelDefault is Config.PartitionLabel when "".
	PartitionLabelDefault = "lakeshore.dev/pool"
	// GPUTypeLabelDefault is Config.GPUTypeLabel when "".
	GPUTypeLabelDefault = "lakeshore.dev/gpu-type"
	// ContainerName is the worker's container in its Pod.
	ContainerName = "worker"
)

// secretEnv are variables a Pod spec never holds in clear text (anyone who may read Pods
// would read them): they come from Config.Secret when it is set, else from the launch's
// Secret.
var secretEnv = []string{"LAKESHORE_TOKEN"}

// clearEnv are the variables a Pod spec holds in clear text, for kubectl describe: the
// ones the supervisor sets to describe the launch (and LAKESHORE_HOME, LAKESHORE_URL
// without a password). Every other variable — the launch policy's env, the token — comes
// from the launch's Secret (LaunchSecret).
var clearEnv = []string{provider.EnvLaunchID, provider.EnvProvider, provider.EnvQueue, provider.EnvNamespace,
	provider.EnvShape, provider.EnvOffers, "LAKESHORE_HOME", "LAKESHORE_URL"}

// inClear reports whether variable k with value v may be written into a Pod spec.
func inClear(k, v string) bool {
	return slices.Contains(clearEnv, k) && plane.RedactURL(v) == v
}

// Config configures a Provider.
type Config struct {
	// Name is the provider's declared name; the Provider's name is "kubernetes:" + Name.
	// Required; also the LabelProvider value of its Pods.
	Name string
	// Namespace is the Kubernetes namespace of the Pods. Defaults to NamespaceDefault.
	Namespace string
	// Image is the workers' container image (it holds lakeshore, or Python with the
	// lakeshore-queue package). Required.
	Image string
	// Lakeshore is the lakeshore binary in the image: a worker command whose first word is
	// "lakeshore" runs it instead. Defaults to LakeshoreDefault (found on the image's PATH).
	Lakeshore string
	// ServiceAccount is the Pods' service account; "": the namespace's default.
	ServiceAccount string
	// NodeSelector is added to every Pod's node selector.
	NodeSelector map[string]string
	// PartitionLabel is the node label a launch's Resources.Partition selects (a launch
	// with partition "a100" gets nodeSelector PartitionLabel=a100). Defaults to
	// PartitionLabelDefault.
	PartitionLabel string
	// GPUResource is the extended resource a launch's GPUs ask for. Defaults to
	// GPUResourceDefault (nvidia.com/gpu).
	GPUResource string
	// GPUTypeLabel is the node label a shape's gpu_type selects (a shape with gpu_type
	// a100 gets nodeSelector GPUTypeLabel=a100). Defaults to GPUTypeLabelDefault. A shape's
	// labels are node labels as they are (zone=east selects nodes labelled zone=east).
	GPUTypeLabel string
	// PlaneURL, when set, is LAKESHORE_URL for the workers (the plane as Pods reach it),
	// replacing the supervisor's; LAKESHORE_HOME is then dropped.
	PlaneURL string
	// Secret names a Secret in Namespace, made by the operator, whose keys become the
	// workers' environment (envFrom): when set, LAKESHORE_TOKEN and a plane URL with a
	// password come from it rather than from the supervisor. Without it they go into the
	// launch's own Secret (LaunchSecret), as the policy's env always does.
	Secret string
	// ImagePullPolicy is the container's pull policy ("": Kubernetes' default).
	ImagePullPolicy corev1.PullPolicy
}

// providerKeys are the options a provider of type kubernetes may have besides type.
var providerKeys = []string{"gpu_resource", "image", "image_pull_policy", "kubeconfig", "lakeshore", "namespace",
	"gpu_type_label", "node_selector", "partition_label", "plane_url", "secret", "service_account"}

// FromConfig makes a Config of a provider of type kubernetes declared in a project file,
// and returns its kubeconfig option ("" : in-cluster, else $KUBECONFIG or ~/.kube/config;
// see NewClient). node_selector is "key=value,key=value". Errors: *fabric.ConfigError
// naming the file, the line and the field.
func FromConfig(file string, p *fabric.Provider) (Config, string, error) {
	fail := func(field, msg string, allowed ...string) error {
		return &fabric.ConfigError{File: file, Line: p.Line, Field: "providers." + p.Name + field, Message: msg, Allowed: allowed}
	}
	if p.Type != "kubernetes" {
		return Config{}, "", fail(".type", fmt.Sprintf("a provider of type %s is not a kubernetes provider", p.Type))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Options)) {
		if !slices.Contains(providerKeys, k) {
			return Config{}, "", fail("."+k, fmt.Sprintf("unknown key %q", k), append([]string{"type"}, providerKeys...)...)
		}
	}
	o := p.Options
	cfg := Config{Name: p.Name, Namespace: o["namespace"], Image: o["image"], Lakeshore: o["lakeshore"],
		ServiceAccount: o["service_account"], PartitionLabel: o["partition_label"], GPUResource: o["gpu_resource"], GPUTypeLabel: o["gpu_type_label"],
		PlaneURL: o["plane_url"], Secret: o["secret"], ImagePullPolicy: corev1.PullPolicy(o["image_pull_policy"])}
	if s := o["node_selector"]; s != "" {
		cfg.NodeSelector = map[string]string{}
		for kv := range strings.SplitSeq(s, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return Config{}, "", fail(".node_selector", fmt.Sprintf("bad selector %q: want key=value,key=value", s))
			}
			cfg.NodeSelector[k] = v
		}
	}
	if cfg.Image == "" {
		return Config{}, "", fail(".image", "missing: name the workers' container image")
	}
	if err := cfg.check(); err != nil {
		return Config{}, "", fail("", err.Error())
	}
	return cfg, o["kubeconfig"], nil
}

// check reports what is wrong with cfg, as a sentence.
func (c *Config) check() error {
	if c.Name == "" || len(validation.IsValidLabelValue(c.Name)) > 0 {
		return fmt.Errorf("bad provider name %q: it is the Pods' %s label value (63 of [A-Za-z0-9_.-])", c.Name, LabelProvider)
	}
	if c.Image == "" {
		return errors.New("no image: name the workers' container image")
	}
	if c.Namespace != "" && len(validation.IsDNS1123Label(c.Namespace)) > 0 {
		return fmt.Errorf("bad namespace %q: want a Kubernetes namespace name (lowercase letters, digits and -)", c.Namespace)
	}
	switch c.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("bad image_pull_policy %q (allowed: Always, IfNotPresent, Never)", c.ImagePullPolicy)
	}
	for k, v := range c.NodeSelector {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return fmt.Errorf("bad node selector %s=%s: want a label key and value", k, v)
		}
	}
	return nil
}

// NewClient returns a client of the cluster: from kubeconfig when given, else in-cluster
// (the supervisor runs in a Pod), else $KUBECONFIG or ~/.kube/config. Errors: no cluster
// configuration found, or it is malformed.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	var (
		rc  *rest.Config
		err error
	)
	if kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	}
	if kubeconfig != "" || errors.Is(err, rest.ErrNotInCluster) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider: no cluster configuration (in-cluster, kubeconfig:, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// Provider runs workers as Pods. Create it with New; safe for concurrent use.
type Provider struct {
	cfg    Config
	client kubernetes.Interface
}

// New checks cfg and returns the provider over client. Errors: *plane.InvalidError for a
// bad Config.
func New(cfg Config, client kubernetes.Interface) (*Provider, error) {
	if err := cfg.check(); err != nil {
		return nil, plane.Invalid("kubernetes provider", cfg.Name, err.Error())
	}
	if client == nil {
		return nil, plane.Invalid("kubernetes client", nil, "pass a client (NewClient)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = NamespaceDefault
	}
	if cfg.Lakeshore == "" {
		cfg.Lakeshore = LakeshoreDefault
	}
	if cfg.GPUResource == "" {
		cfg.GPUResource = GPUResourceDefault
	}
	if cfg.GPUTypeLabel == "" {
		cfg.GPUTypeLabel = GPUTypeLabelDefault
	}
	if cfg.PartitionLabel == "" {
		cfg.PartitionLabel = PartitionLabelDefault
	}
	return &Provider{cfg: cfg, client: client}, nil
}

// Name implements provider.Provider: "kubernetes:" + the declared name.
func (p *Provider) Name() string { return plane.ProviderKubernetesPrefix + p.cfg.Name }

// PodName is the name of launch id's Pod: "lakeshore-" + the id in lowercase.
func PodName(id string) string { return "lakeshore-" + strings.ToLower(id) }

// SecretName is the name of launch id's Secret: the Pod's name (another kind, so no clash).
func SecretName(id string) string { return PodName(id) }

// Pod builds the Pod of a launch (what Launch creates). Only the variables that describe
// the launch (LAKESHORE_LAUNCH_ID, _QUEUE, _NAMESPACE, _PROVIDER, _SHAPE, _OFFERS, _HOME,
// and LAKESHORE_URL without a password) are written in its spec; every other variable
// (the policy's env, LAKESHORE_TOKEN) is a valueFrom.secretKeyRef to the launch's Secret
// (LaunchSecret), or left to Config.Secret (envFrom) for LAKESHORE_TOKEN and a URL with a
// password when that is set. Errors: a bad launch id or environment name, naming it.
func (p *Provider) Pod(l *provider.Launch) (*corev1.Pod, error) {
	pod, _, err := p.manifest(l)
	return pod, err
}

// LaunchSecret builds the Secret of a launch, without its owner (Launch sets the Pod as its
// owner once the API server gave the Pod a UID): the values of the variables the Pod takes
// from it, keyed by their names; nil when the Pod takes none. Errors: those of Pod.
func (p *Provider) LaunchSecret(l *provider.Launch) (*corev1.Secret, error) {
	pod, data, err := p.manifest(l)
	if err != nil || len(data) == 0 {
		return nil, err
	}
	return p.secret(l.ID, pod.Labels, data), nil
}

// secret is the Secret of launch id, with its Pod's labels and data.
func (p *Provider) secret(id string, labels map[string]string, data map[string]string) *corev1.Secret {
	bytes := make(map[string][]byte, len(data))
	for k, v := range data {
		bytes[k] = []byte(v)
	}
	immutable := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(id), Namespace: p.cfg.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque, Immutable: &immutable, Data: bytes,
	}
}

// manifest builds the Pod of a launch and the data of its Secret (nil: none).
func (p *Provider) manifest(l *provider.Launch) (*corev1.Pod, map[string]string, error) {
	if len(l.Command) == 0 {
		return nil, nil, plane.Invalid("worker command", l.Command, "give the worker's command")
	}
	if !validID(l.ID) {
		return nil, nil, plane.Invalid("launch id", l.ID, "use letters and digits only")
	}
	argv := slices.Clone(l.Command)
	if argv[0] == LakeshoreDefault {
		argv[0] = p.cfg.Lakeshore
	}
	env := maps.Clone(l.Env)
	if env == nil {
		env = map[string]string{}
	}
	if p.cfg.PlaneURL != "" {
		provider.UsePlaneURL(env, p.cfg.PlaneURL)
	}
	env[provider.EnvLaunchID] = l.ID
	var (
		vars []corev1.EnvVar
		data map[string]string
	)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if len(validation.IsEnvVarName(k)) > 0 || len(validation.IsConfigMapKey(k)) > 0 {
			return nil, nil, plane.Invalid("worker environment", k, "use a valid environment variable name (letters, digits, '_', '-', '.')")
		}
		switch {
		case inClear(k, v):
			vars = append(vars, corev1.EnvVar{Name: k, Value: v})
		case p.cfg.Secret != "" && (slices.Contains(secretEnv, k) || plane.RedactURL(v) != v):
			// from the operator's Secret (envFrom)
		default:
			if data == nil {
				data = map[string]string{}
			}
			data[k] = v
			vars = append(vars, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(l.ID)}, Key: k}}})
		}
	}
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	r := l.Resources
	if r.CPUs > 0 {
		req[corev1.ResourceCPU] = *resource.NewQuantity(int64(r.CPUs), resource.DecimalSI)
	}
	if r.MemoryMB > 0 {
		q := *resource.NewQuantity(r.MemoryMB<<20, resource.BinarySI)
		req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = q, q
	}
	if r.GPUs > 0 { // an extended resource: its request must equal its limit
		q := *resource.NewQuantity(int64(r.GPUs), resource.DecimalSI)
		name := corev1.ResourceName(p.cfg.GPUResource)
		req[name], lim[name] = q, q
	}
	selector := maps.Clone(p.cfg.NodeSelector)
	// A shape's requirement takes the place of the policy's resources it names, and selects
	// nodes by its GPU type and labels.
	if q := l.Requirement; q != nil && !q.IsZero() {
		if err := p.CanOffer(q); err != nil {
			return nil, nil, err
		}
		if q.MilliCPUs > 0 {
			req[corev1.ResourceCPU] = *resource.NewMilliQuantity(q.MilliCPUs, resource.DecimalSI)
		}
		if q.MemoryBytes > 0 {
			m := *resource.NewQuantity(q.MemoryBytes, resource.BinarySI)
			req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = m, m
		}
		if q.GPUs > 0 {
			g := *resource.NewQuantity(q.GPUs, resource.DecimalSI)
			name := corev1.ResourceName(p.cfg.GPUResource)
			req[name], lim[name] = g, g
		}
		if selector == nil {
			selector = map[string]string{}
		}
		if q.GPUType != "" {
			selector[p.cfg.GPUTypeLabel] = q.GPUType
		}
		maps.Copy(selector, q.Labels)
	}
	if r.Partition != "" {
		if selector == nil {
			selector = map[string]string{}
		}
		if len(validation.IsValidLabelValue(r.Partition)) > 0 {
			return nil, nil, plane.Invalid("partition", r.Partition, "a kubernetes provider's partition is a node label value (63 of [A-Za-z0-9_.-])")
		}
		selector[p.cfg.PartitionLabel] = r.Partition
	}
	c := corev1.Container{Name: ContainerName, Image: p.cfg.Image, Command: argv, Env: vars,
		ImagePullPolicy: p.cfg.ImagePullPolicy, Resources: corev1.ResourceRequirements{}}
	if len(req) > 0 {
		c.Resources.Requests = req
	}
	if len(lim) > 0 {
		c.Resources.Limits = lim
	}
	if p.cfg.Secret != "" {
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.cfg.Secret}}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(l.ID), Namespace: p.cfg.Namespace,
			Labels:      podLabels(p.cfg.Name, l),
			Annotations: map[string]string{AnnotationNamespace: l.Namespace, AnnotationQueue: l.Queue}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: p.cfg.ServiceAccount,
			NodeSelector: selector, Containers: []corev1.Container{c}},
	}
	if r.TimeLimit > 0 {
		s := int64((r.TimeLimit + time.Second - 1) / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &s
	}
	return pod, data, nil
}

// podLabels are the labels of launch l's Pod.
func podLabels(name string, l *provider.Launch) map[string]string {
	out := map[string]string{LabelManagedBy: "lakeshore", LabelProvider: name, LabelLaunch: l.ID}
	if l.Shape != "" && len(validation.IsValidLabelValue(l.Shape)) == 0 {
		out[LabelShape] = l.Shape
	}
	return out
}

// CanOffer implements provider.ShapeChecker: a shape's GPU type and labels must be valid
// node label values (and its label keys node label keys), which select its nodes. Whether
// a node has them is the scheduler's to say (the Pod stays pending until one does). The
// selector's keys the operator set — node_selector's, gpu_type_label and partition_label —
// are not the shape's labels to change: a label of a node_selector key may only repeat its
// value, one of gpu_type_label only the shape's gpu_type, and partition_label is the
// policy's partition alone (the shape's labels, the submitter's, once replaced them).
func (p *Provider) CanOffer(r *plane.Requirement) error {
	if r.GPUType != "" && len(validation.IsValidLabelValue(r.GPUType)) > 0 {
		return fmt.Errorf("kubernetes provider %s: the shape's gpu_type %q is not a node label value", p.cfg.Name, r.GPUType)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		v := r.Labels[k]
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return fmt.Errorf("kubernetes provider %s: the shape's label %s=%s is not a node label", p.cfg.Name, k, v)
		}
		switch operator, ok := p.cfg.NodeSelector[k]; {
		case ok && v != operator:
			return fmt.Errorf("kubernetes provider %s: the shape's label %s=%s conflicts with the provider's node_selector %s=%s", p.cfg.Name, k, v, k, operator)
		case k == p.cfg.GPUTypeLabel && v != r.GPUType:
			return fmt.Errorf("kubernetes provider %s: the shape's label %s=%s is the provider's gpu_type_label: ask the GPU type with gpu_type", p.cfg.Name, k, v)
		case k == p.cfg.PartitionLabel:
			return fmt.Errorf("kubernetes provider %s: the shape's label %s is the provider's partition_label, which the queue's launch policy sets", p.cfg.Name, k)
		}
	}
	return nil
}

// Launch implements provider.Provider: it creates the launch's Pod (Pod), then its Secret
// (LaunchSecret) owned by the Pod (an ownerReference with the Pod's UID), so Kubernetes'
// garbage collector deletes the Secret with the Pod, however the Pod goes (Stop, List's
// clean-up of ended Pods, kubectl delete). The container cannot start before its Secret
// exists (the kubelet waits for a secretKeyRef), and when the Secret cannot be created the
// Pod is deleted at once. It returns once the API server accepted both; the Pod is pending
// until a node runs it. Errors: those of Pod, and the API server's (a namespace that does
// not exist, a quota exceeded, no permission to create Pods or Secrets), never a value of
// the environment.
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	pod, data, err := p.manifest(l)
	if err != nil {
		return err
	}
	pods := p.client.CoreV1().Pods(p.cfg.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes provider %s: create Pod %s/%s: %w", p.cfg.Name, p.cfg.Namespace, pod.Name, err)
	}
	if len(data) == 0 {
		return nil
	}
	secret := p.secret(l.ID, pod.Labels, data)
	secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: created.Name, UID: created.UID}}
	if _, err := p.client.CoreV1().Secrets(p.cfg.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		err = fmt.Errorf("kubernetes provider %s: create Secret %s/%s of the workers' environment (may the supervisor's account create Secrets there?): %w",
			p.cfg.Name, p.cfg.Namespace, secret.Name, err)
		zero := int64(0)
		if derr := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); derr != nil && !apierrors.IsNotFound(derr) {
			// The Pod waits for its Secret and never starts; List shows it pending and the
			// supervisor stops it after register_timeout.
			return fmt.Errorf("%w; and delete Pod %s/%s: %w", err, p.cfg.Namespace, pod.Name, derr)
		}
		return err
	}
	return nil
}

// selector is the label selector of this provider's Pods.
func (p *Provider) selector() string {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: "lakeshore", LabelProvider: p.cfg.Name}).String()
}

// List implements provider.Provider: this provider's Pods (by label, an earlier
// supervisor's included). Pending Pods are pending; Running Pods, and Pods being deleted
// (draining) that have not ended, are running; Pods that ended (Succeeded, Failed) are
// left out and deleted. Errors: the API server's.
func (p *Provider) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	pods, err := p.client.CoreV1().Pods(p.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.selector()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider %s: list Pods in %s: %w", p.cfg.Name, p.cfg.Namespace, err)
	}
	var out []provider.LaunchStatus
	for i := range pods.Items {
		pod := &pods.Items[i]
		id := pod.Labels[LabelLaunch]
		if !validID(id) {
			continue
		}
		l := provider.LaunchStatus{ID: id, Namespace: pod.Annotations[AnnotationNamespace], Queue: pod.Annotations[AnnotationQueue],
			Shape: pod.Labels[LabelShape]}
		switch pod.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			if pod.DeletionTimestamp == nil {
				_ = p.client.CoreV1().Pods(p.cfg.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
			}
			continue
		case corev1.PodRunning:
			l.State = provider.LaunchRunning
		default: // Pending, or not yet given a phase
			l.State = provider.LaunchPending
		}
		l.Detail = fmt.Sprintf("pod %s/%s %s", pod.Namespace, pod.Name, pod.Status.Phase)
		if pod.Spec.NodeName != "" {
			l.Detail += " on " + pod.Spec.NodeName
		}
		if pod.DeletionTimestamp != nil {
			l.Detail += " (terminating)"
		}
		out = append(out, l)
	}
	return out, nil
}

// Stop implements provider.Provider: it deletes the launch's Pod with grace as its
// termination grace period (the kubelet sends SIGTERM, then SIGKILL after grace) and waits
// until the Pod is gone or ctx ends (then the Pod goes on terminating by itself). A Pod
// that does not exist is not an error. Errors: the API server's.
func (p *Provider) Stop(ctx context.Context, id string, grace time.Duration) error {
	if !validID(id) {
		return nil
	}
	pods := p.client.CoreV1().Pods(p.cfg.Namespace)
	name := PodName(id)
	seconds := int64(grace / time.Second)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &seconds})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes provider %s: delete Pod %s/%s: %w", p.cfg.Name, p.cfg.Namespace, name, err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // deleted: the Pod terminates by itself; List shows it until then
		case <-tick.C:
		}
	}
}

// Check implements provider.Checker: the provider may list Pods in its namespace. Errors:
// the API server does not answer, or refuses (no permission).
func (p *Provider) Check(ctx context.Context) error {
	_, err := p.client.CoreV1().Pods(p.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.selector(), Limit: 1})
	if err != nil {
		return fmt.Errorf("kubernetes provider %s: cannot list Pods in namespace %s (is the cluster reachable, and may the supervisor's account create, list and delete Pods there?): %w",
			p.cfg.Name, p.cfg.Namespace, err)
	}
	return nil
}

// validID reports whether id is a launch id this provider takes: provider.LaunchIDValid, at
// most 40 (a label value, and "lakeshore-" + id a Pod name).
func validID(id string) bool { return provider.LaunchIDValid(id, 40) }

package api

// Route is one route of the API: the source of the server's route registration and of the
// OpenAPI document, so the two cannot drift apart.
type Route struct {
	// Method and Path are the net/http pattern ("POST", "/v1/invocations/{id}/cancel").
	Method string
	Path   string
	// Operation is the OpenAPI operationId.
	Operation string
	// Summary says what the route does.
	Summary string
	// Permission is what an access token needs ("" for public routes).
	Permission string
	// Query lists the query parameters.
	Query []Param
	// Request is a pointer to the zero request body, nil when the route takes none.
	Request any
	// Response is a pointer to the zero answer body; nil for answers that are not bodies of
	// this package (streams, metrics, the OpenAPI document).
	Response any
	// ContentType is the answer's media type when Response is nil.
	ContentType string
	// RequestContentType, when Request is nil, is the media type of a raw request body
	// (a code archive's application/gzip).
	RequestContentType string
}

// Param is a query parameter. Type is an OpenAPI type: "string", "integer" or "number".
type Param struct {
	Name        string
	Type        string
	Description string
}

// QueuePath is the path prefix of the routes addressed by queue.
const QueuePath = "/v1/namespaces/{namespace}/queues/{queue}"

// SchedulePath is the path of one schedule.
const SchedulePath = "/v1/namespaces/{namespace}/schedules/{name}"

// InvocationPath is the path prefix of the routes addressed by invocation.
const InvocationPath = "/v1/invocations/{id}"

// Routes lists every route of the API: the dispatch routes, then DataRoutes. Each call
// returns a new slice.
func Routes() []Route {
	pSince := Param{"since", "integer", "frames with seq > since; -1 (default) reads from the start"}
	pLimit := Param{"limit", "integer", "at most this many frames (default 1000)"}
	pWait := Param{"wait", "number", "seconds to wait for a frame when none is there (default 0; capped by the server's long-poll limit)"}
	pTimeout := Param{"timeout", "number", "seconds of silence that end the stream (default 30)"}
	pRedacted := Param{"redacted", "string", "true: every env value and URL password hidden, as a queue's own tokens read them, whatever the token (the dashboard asks so); false (default): as the token may read them"}
	return append([]Route{
		{Method: "GET", Path: "/healthz", Operation: "healthz", Summary: "liveness", Response: &HealthResponse{}},
		{Method: "GET", Path: "/readyz", Operation: "readyz", Summary: "readiness: 503 while stopping or when the plane fails", Response: &HealthResponse{}},
		{Method: "GET", Path: "/v1/openapi.json", Operation: "openapi", Summary: "this document", ContentType: ContentTypeJSON},
		{Method: "GET", Path: "/metrics", Operation: "metrics", Permission: "any valid token (series scoped to it)", Summary: "Prometheus metrics", ContentType: "text/plain"},

		{Method: "POST", Path: QueuePath + "/invocations", Operation: "submit", Permission: "submit", Summary: "submit one invocation",
			Request: &SubmitRequest{}, Response: &SubmitResult{}},
		{Method: "POST", Path: QueuePath + "/invocations/batch", Operation: "submitBatch", Permission: "submit", Summary: "submit invocations all-or-nothing",
			Request: &SubmitBatchRequest{}, Response: &SubmitBatchResponse{}},
		{Method: "GET", Path: QueuePath + "/invocations", Operation: "list", Permission: "read or submit", Summary: "list invocations, one page",
			Query: []Param{
				{"state", "string", "one state (queued, running, succeeded, failed, cancelled, killed, timeout); empty for all"},
				{"key_prefix", "string", "keep invocations whose key starts with it"},
				{"after", "string", "the next cursor of the previous page"},
				{"limit", "integer", "page size, 1–1000 (default 100)"},
				{"order", "string", "newest (default) or oldest"},
			}, Response: &ListResponse{}},
		{Method: "POST", Path: QueuePath + "/claim", Operation: "claim", Permission: "consume", Summary: "claim invocations (long-poll)",
			Request: &ClaimRequest{}, Response: &ClaimResponse{}},
		{Method: "POST", Path: QueuePath + "/settle-and-claim", Operation: "settleAndClaim", Permission: "consume", Summary: "settle invocations and claim the next ones in one transaction (long-poll)",
			Request: &SettleAndClaimRequest{}, Response: &SettleAndClaimResponse{}},
		{Method: "GET", Path: QueuePath + "/count", Operation: "count", Permission: "any", Summary: "count invocations in one state",
			Query: []Param{{"state", "string", "the state (default queued)"}}, Response: &CountResponse{}},
		{Method: "GET", Path: QueuePath + "/stats", Operation: "stats", Permission: "any", Summary: "counts by state and admission of one queue",
			Response: &QueueStats{}},
		{Method: "GET", Path: QueuePath + "/admission", Operation: "admissionGet", Permission: "any", Summary: "the queue's admission block",
			Response: &AdmissionResponse{}},
		{Method: "PUT", Path: QueuePath + "/admission", Operation: "admissionSet", Permission: "admin", Summary: "set the admission block",
			Request: &Admission{}, Response: &AdmissionResponse{}},
		{Method: "DELETE", Path: QueuePath + "/admission", Operation: "admissionDelete", Permission: "admin", Summary: "remove the admission block",
			Response: &ChangedResponse{}},
		{Method: "PUT", Path: QueuePath + "/pause", Operation: "pause", Permission: "admin", Summary: "pause the queue: submits are accepted, claims take nothing (changed: it was not paused)",
			Response: &ChangedResponse{}},
		{Method: "DELETE", Path: QueuePath + "/pause", Operation: "resume", Permission: "admin", Summary: "resume the queue: its queued invocations are claimable again (changed: it was paused)",
			Response: &ChangedResponse{}},
		{Method: "GET", Path: QueuePath + "/provider", Operation: "providerGet", Permission: "any", Summary: "the queue's provider and launch policy",
			Query: []Param{pRedacted}, Response: &ProviderResponse{}},
		{Method: "PUT", Path: QueuePath + "/provider", Operation: "providerSet", Permission: "admin", Summary: "attach a provider (replacing any)",
			Request: &Provider{}, Response: &ProviderResponse{}},
		{Method: "DELETE", Path: QueuePath + "/provider", Operation: "providerDelete", Permission: "admin", Summary: "detach the provider",
			Response: &ChangedResponse{}},
		{Method: "POST", Path: QueuePath + "/topics/{topic}/frames", Operation: "topicPost", Permission: "submit or consume", Summary: "post a frame to a topic",
			Request: &PostRequest{}, Response: &PostResponse{}},
		{Method: "GET", Path: QueuePath + "/topics/{topic}/frames", Operation: "topicFrames", Permission: "any", Summary: "read a topic's frames (long-poll)",
			Query: []Param{pSince, pLimit, pWait}, Response: &FramesResponse{}},
		{Method: "GET", Path: QueuePath + "/topics/{topic}/stream", Operation: "topicStream", Permission: "any", Summary: "follow a topic live",
			Query: []Param{pSince, pTimeout}, ContentType: ContentTypeEventStream},

		{Method: "GET", Path: InvocationPath, Operation: "get", Permission: "read or submit", Summary: "one invocation", Response: &Invocation{}},
		{Method: "GET", Path: InvocationPath + "/wait", Operation: "wait", Permission: "read or submit", Summary: "wait until the invocation is terminal (long-poll)",
			Query: []Param{{"timeout", "number", "seconds to wait (default 0; capped by the server's long-poll limit)"}}, Response: &WaitResponse{}},
		{Method: "GET", Path: InvocationPath + "/frames", Operation: "frames", Permission: "read or submit", Summary: "read the invocation's frames (long-poll)",
			Query: []Param{pSince, pLimit, pWait}, Response: &FramesResponse{}},
		{Method: "GET", Path: InvocationPath + "/stream", Operation: "stream", Permission: "read or submit", Summary: "follow the invocation's frames live",
			Query: []Param{pSince, pTimeout}, ContentType: ContentTypeEventStream},
		{Method: "POST", Path: InvocationPath + "/cancel", Operation: "cancel", Permission: "submit", Summary: "cancel a queued invocation", Response: &ChangedResponse{}},
		{Method: "POST", Path: InvocationPath + "/kill", Operation: "kill", Permission: "submit", Summary: "kill a running invocation", Response: &ChangedResponse{}},
		{Method: "POST", Path: InvocationPath + "/settle", Operation: "settle", Permission: "consume", Summary: "ack or nack a claimed invocation",
			Request: &SettleRequest{}, Response: &EmptyResponse{}},
		{Method: "POST", Path: InvocationPath + "/heartbeat", Operation: "heartbeat", Permission: "consume", Summary: "extend a lease",
			Request: &HeartbeatRequest{}, Response: &HeartbeatResponse{}},
		{Method: "POST", Path: InvocationPath + "/frames", Operation: "post", Permission: "consume", Summary: "post a frame to the invocation's journal",
			Request: &PostRequest{}, Response: &PostResponse{}},
		{Method: "POST", Path: "/v1/settle", Operation: "settleBatch", Permission: "consume", Summary: "settle several invocations",
			Request: &SettlesRequest{}, Response: &SettlesResponse{}},
		{Method: "POST", Path: "/v1/heartbeat", Operation: "heartbeatBatch", Permission: "consume", Summary: "extend several leases",
			Request: &HeartbeatsRequest{}, Response: &HeartbeatsResponse{}},

		{Method: "GET", Path: "/v1/queues", Operation: "queues", Permission: "any (only queues the token covers)", Summary: "counts of every queue",
			Query: []Param{{"namespace", "string", "restrict to one namespace"}}, Response: &QueuesResponse{}},
		{Method: "PUT", Path: "/v1/namespaces/{namespace}/workers/{id}", Operation: "workerRegister", Permission: "consume", Summary: "register or refresh a worker",
			Request: &WorkerRegisterRequest{}, Response: &EmptyResponse{}},
		{Method: "DELETE", Path: "/v1/namespaces/{namespace}/workers/{id}", Operation: "workerRemove", Permission: "consume", Summary: "remove a worker",
			Response: &EmptyResponse{}},
		{Method: "GET", Path: "/v1/workers", Operation: "workers", Permission: "any (only namespaces the token covers)", Summary: "live workers",
			Query: []Param{{"namespace", "string", "restrict to one namespace"}, {"seen_within", "number", "seconds (default 60)"}}, Response: &WorkersResponse{}},
		{Method: "GET", Path: "/v1/providers", Operation: "providers", Permission: "any (only queues the token covers)", Summary: "queues with a provider",
			Query: []Param{{"namespace", "string", "restrict to one namespace"}, pRedacted}, Response: &QueueProvidersResponse{}},
		{Method: "GET", Path: "/v1/demand", Operation: "demand", Permission: "any (only queues the token covers)", Summary: "queued, running and oldest ready age per (queue, shape), for autoscalers",
			Query: []Param{{"namespace", "string", "restrict to one namespace"}, {"queue", "string", "restrict to one queue (with namespace)"},
				{"shape", "string", "restrict to one shape key (\"default\" for the default shape)"}}, Response: &DemandResponse{}},
		{Method: "GET", Path: "/v1/schedules", Operation: "schedules", Permission: "any (only schedules of queues the token covers)", Summary: "schedules with their last and next fire, one page",
			Query: []Param{{"namespace", "string", "restrict to one namespace"}, {"name", "string", "one schedule's name (with namespace)"},
				{"after", "string", "the next cursor of the previous page"}, {"limit", "integer", "page size, 1–1000 (default 100)"}},
			Response: &SchedulesResponse{}},
		{Method: "PUT", Path: SchedulePath, Operation: "scheduleSet", Permission: "submit (on the schedule's queue)", Summary: "create or replace a schedule",
			Request: &Schedule{}, Response: &Schedule{}},
		{Method: "DELETE", Path: SchedulePath, Operation: "scheduleDelete", Permission: "submit (on the schedule's queue)", Summary: "remove a schedule",
			Response: &ChangedResponse{}},
		{Method: "POST", Path: SchedulePath + "/pause", Operation: "schedulePause", Permission: "submit (on the schedule's queue)", Summary: "pause a schedule",
			Response: &Schedule{}},
		{Method: "POST", Path: SchedulePath + "/resume", Operation: "scheduleResume", Permission: "submit (on the schedule's queue)", Summary: "resume a schedule from its next tick",
			Response: &Schedule{}},
		{Method: "POST", Path: "/v1/namespaces/{namespace}/leases/acquire", Operation: "leaseAcquire", Permission: "admin (on every queue of the namespace)", Summary: "take or renew a named lease",
			Request: &LeaseRequest{}, Response: &LeaseResponse{}},
		{Method: "POST", Path: "/v1/namespaces/{namespace}/leases/release", Operation: "leaseRelease", Permission: "admin (on every queue of the namespace)", Summary: "free a named lease held by holder",
			Request: &LeaseRequest{}, Response: &EmptyResponse{}},
		{Method: "POST", Path: "/v1/trim", Operation: "trim", Permission: "admin (admin* without a queue)", Summary: "delete terminal invocations",
			Request: &TrimRequest{}, Response: &TrimResponse{}},
		{Method: "POST", Path: "/v1/maintain", Operation: "maintain", Permission: "admin*", Summary: "run one maintenance pass", Response: &EmptyResponse{}},
		{Method: "POST", Path: "/v1/tokens", Operation: "tokenCreate", Permission: "admin*", Summary: "create an access token",
			Request: &TokenCreateRequest{}, Response: &TokenCreateResponse{}},
		{Method: "GET", Path: "/v1/tokens", Operation: "tokens", Permission: "admin*", Summary: "list tokens (no hashes)", Response: &TokensResponse{}},
		{Method: "POST", Path: "/v1/tokens/lookup", Operation: "tokenLookup", Permission: "admin*", Summary: "find a token by hash",
			Request: &TokenLookupRequest{}, Response: &Token{}},
		{Method: "DELETE", Path: "/v1/tokens/{id}", Operation: "tokenRevoke", Permission: "admin*", Summary: "revoke a token", Response: &ChangedResponse{}},
	}, append(DataRoutes(), CodeRoutes()...)...)
}

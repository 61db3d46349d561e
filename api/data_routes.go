package api

// The data-queue routes, part of Routes (docs/http-api.md, "Data queues").

// DataRoutes lists the routes of data queues. Each call returns a new slice.
func DataRoutes() []Route {
	pPartition := Param{"partition", "string", "the partition (default: default)"}
	pFields := Param{"fields", "string", "comma-separated field names (default: every field)"}
	pRank := Param{"rank", "integer", "this reader's rank, 0 ≤ rank < world_size"}
	pWorld := Param{"world_size", "integer", "the number of readers sharing the log (0 or 1: no sharding)"}
	pShardCol := Param{"shard_column", "string", "the field hashed for sharding (default: the global index)"}
	pBuckets := Param{"shard_buckets", "integer", "hash buckets (default 64, at least world_size)"}
	return []Route{
		{Method: "GET", Path: "/v1/namespaces/{namespace}/data", Operation: "dataQueues", Permission: "data:read", Summary: "the data queues of a namespace",
			Response: &DataQueuesResponse{}},
		{Method: "POST", Path: DataPath + "/records", Operation: "dataPut", Permission: "data:put",
			Summary: "put records into a partition atomically (JSON, msgpack, or an Arrow IPC stream)",
			Query: []Param{pPartition, {"put_id", "string", "the batch's idempotency id (a repeat answers the first put's indexes)"},
				{"admission_task", "string", "back-pressure: the consumer whose unconsumed records count"},
				{"max_unconsumed", "integer", "back-pressure: at most this many records of the partition unconsumed by admission_task (0: no bound)"},
				{"max_ahead", "integer", "back-pressure: a record's target version at most this many versions above the current one (default: no bound)"},
				{"admission_block", "boolean", "back-pressure: wait for room instead of failing with queue_full"},
				{"admission_timeout", "number", "back-pressure: seconds a blocked put waits (default 30)"}},
			Request: &DataPutRequest{}, Response: &DataIndexesResponse{}},
		{Method: "GET", Path: DataPath + "/records", Operation: "dataRead", Permission: "data:read",
			Summary: "read records by index range (Arrow IPC stream; JSON or msgpack rows on request)",
			Query: []Param{{"offset", "integer", "the first global index (default 0)"}, {"limit", "integer", "at most this many records (default 1000)"},
				pFields, pPartition, pRank, pWorld, pShardCol, pBuckets,
				{"wait", "number", "seconds to wait for a record when none is there (default 0; capped by the long-poll limit)"}},
			Response: &DataRowsResponse{}, ContentType: ContentTypeArrow},
		{Method: "GET", Path: DataPath + "/stream", Operation: "dataStream", Permission: "data:read",
			Summary: "follow the log: one Arrow IPC stream, a record batch per arrival",
			Query: []Param{{"offset", "integer", "the first global index (default 0)"}, {"batch_size", "integer", "at most this many records per batch (default 1000)"},
				pFields, pPartition, pRank, pWorld, pShardCol, pBuckets,
				{"idle_timeout", "number", "seconds without a new record that end the stream (default 30)"}},
			ContentType: ContentTypeArrow},
		{Method: "POST", Path: DataPath + "/fields", Operation: "dataPutFields", Permission: "data:put", Summary: "merge fields into existing samples",
			Query: []Param{pPartition}, Request: &DataPutFieldsRequest{}, Response: &EmptyResponse{}},
		{Method: "POST", Path: DataPath + "/flush", Operation: "dataFlush", Permission: "data:put", Summary: "write the tail into fragments", Response: &EmptyResponse{}},
		{Method: "POST", Path: DataPath + "/data", Operation: "dataGet", Permission: "data:read", Summary: "read samples by index (Arrow IPC stream; JSON or msgpack rows on request)",
			Request: &DataGetRequest{}, Response: &DataRowsResponse{}, ContentType: ContentTypeArrow},
		{Method: "POST", Path: DataPath + "/meta", Operation: "dataMeta", Permission: "data:read", Summary: "hand out a batch to a task with a sampler (long-poll with wait)",
			Request: &DataMetaRequest{}, Response: &DataBatchMeta{}},
		{Method: "POST", Path: DataPath + "/batch", Operation: "dataBatch", Permission: "data:read",
			Summary: "GetMeta then GetData in one request: an Arrow IPC stream (_index, then the fields), the rest of the metadata as JSON in the Lakeshore-Batch-Meta header",
			Request: &DataMetaRequest{}, Response: &DataRowsResponse{}, ContentType: ContentTypeArrow},
		{Method: "POST", Path: DataPath + "/produced", Operation: "dataProduced", Permission: "data:read", Summary: "which samples have which fields",
			Request: &DataProducedRequest{}, Response: &DataProducedResponse{}},
		{Method: "POST", Path: DataPath + "/consumption/mark", Operation: "dataMarkConsumed", Permission: "data:read", Summary: "mark samples consumed by a task",
			Request: &DataConsumptionRequest{}, Response: &EmptyResponse{}},
		{Method: "POST", Path: DataPath + "/consumption/reset", Operation: "dataResetConsumption", Permission: "data:read", Summary: "forget a task's consumption of a partition",
			Request: &DataConsumptionRequest{}, Response: &EmptyResponse{}},
		{Method: "GET", Path: DataPath + "/consumption", Operation: "dataConsumed", Permission: "data:read", Summary: "how many samples a task consumed",
			Query: []Param{{"task", "string", "the task"}, pPartition}, Response: &DataConsumedResponse{}},
		{Method: "POST", Path: DataPath + "/clear", Operation: "dataClearSamples", Permission: "data:put", Summary: "drop samples of a partition for good",
			Request: &DataClearRequest{}, Response: &EmptyResponse{}},
		{Method: "DELETE", Path: DataPath + "/partitions/{partition}", Operation: "dataClearPartition", Permission: "data:put",
			Summary: "drop every sample of a partition, its consumption and assignments", Response: &EmptyResponse{}},
		{Method: "POST", Path: DataPath + "/kv", Operation: "dataKVPut", Permission: "data:put", Summary: "put records under keys",
			Query: []Param{pPartition}, Request: &DataKVPutRequest{}, Response: &DataIndexesResponse{}},
		{Method: "POST", Path: DataPath + "/kv/get", Operation: "dataKVGet", Permission: "data:read", Summary: "read keys",
			Request: &DataKVKeysRequest{}, Response: &DataKVResponse{}},
		{Method: "GET", Path: DataPath + "/kv", Operation: "dataKVList", Permission: "data:read", Summary: "list keys",
			Query: []Param{{"partition", "string", "the partition (empty: all)"}}, Response: &DataKVResponse{}},
		{Method: "POST", Path: DataPath + "/kv/clear", Operation: "dataKVClear", Permission: "data:put", Summary: "remove keys and clear their samples",
			Request: &DataKVKeysRequest{}, Response: &EmptyResponse{}},
		{Method: "GET", Path: DataPath + "/schema", Operation: "dataSchema", Permission: "data:read", Summary: "the queue's fields and kinds", Response: &DataSchemaResponse{}},
		{Method: "GET", Path: DataPath + "/stats", Operation: "dataStats", Permission: "data:read", Summary: "counters and storage figures", Response: &DataStats{}},
		{Method: "GET", Path: DataPath + "/version", Operation: "dataVersion", Permission: "data:read", Summary: "the queue's current weight version", Response: &DataWeightVersion{}},
		{Method: "POST", Path: DataPath + "/version", Operation: "dataSetVersion", Permission: "data:put", Summary: "advance the queue's weight version",
			Request: &DataWeightVersion{}, Response: &EmptyResponse{}},
		{Method: "GET", Path: DataPath + "/changes", Operation: "dataChanges", Permission: "data:read", Summary: "wait until the queue's change version passes after (long-poll)",
			Query:    []Param{{"after", "integer", "the last version the client saw"}, {"wait", "number", "seconds to wait (default 0; capped by the long-poll limit)"}},
			Response: &DataVersionResponse{}},
	}
}

package sqliteplane

// Hub keys: a waiter watches the key of what it waits for; the writer notifies it after the
// commit that changed it.

func invocationKey(id string) string      { return "i:" + id }
func journalKey(journal string) string    { return "j:" + journal }
func queueKey(namespace, q string) string { return "q:" + namespace + "/" + q }

package planekit

import "fmt"

// TopicSeq takes, in t, the next seq of the topic name (creating it; closing it when
// final) with one statement (Statements.TopicAppend); ok is false when the topic is
// closed.
func TopicSeq(t Tx, st *Statements, name string, final bool) (seq int64, ok bool, err error) {
	err = t.QueryRow(st.TopicAppend, name, final, t.Now().UnixMilli()).Scan(&seq)
	if NoRows(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("post: %w", err)
	}
	return seq, true, nil
}

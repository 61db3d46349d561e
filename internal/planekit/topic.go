package planekit

import (
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

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

// TopicCap applies plane.CheckTopicCount to topic j, which TopicSeq just created in t (its
// first seq, 0) as the journal name: the queue's topics are counted under the queue's
// CapLock (so concurrent creations count one another), and a topic past the cap is
// deleted again before the caller's error is returned, so a refused post leaves nothing.
// maxTopics is the driver's cap (0 the default, negative none).
func TopicCap(t Tx, st *Statements, j plane.Journal, name string, maxTopics int) (logical, err error) {
	if maxTopics < 0 {
		return nil, nil
	}
	lo, hi := TopicRange(j.Namespace, j.Queue)
	n, err := CapCount(t, st, "lakeshore-topics/"+j.Namespace+"/"+j.Queue, st.TopicCount, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	logical = plane.CheckTopicCount(j.Namespace, j.Queue, int(n)-1, maxTopics) // n counts this one
	if logical != nil {
		if _, err := t.Exec(st.TopicDrop, name); err != nil {
			return nil, fmt.Errorf("post: %w", err)
		}
	}
	return logical, nil
}

// TopicRange is the range of the journal names of queue's topics in namespace
// (JournalName): from the least, inclusive, to the least above every one, exclusive.
func TopicRange(namespace, queue string) (lo, hi string) {
	prefix := "t/" + namespace + "/" + queue + "/"
	return prefix, prefix[:len(prefix)-1] + string(rune('/'+1))
}

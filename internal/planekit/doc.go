// Package planekit holds the storage-agnostic mechanisms that more than one store needs:
// the notification hub that wakes in-process waiters after commits, and the first-come,
// first-served lines of submits blocked on a full queue. A driver (plane/sqliteplane,
// plane/pgplane) or a data store (persist's file and distributed stores) keeps only its
// SQL, its transaction shape and its wiring; the mechanisms live here once.
package planekit

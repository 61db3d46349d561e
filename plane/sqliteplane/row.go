package sqliteplane

import "github.com/lakeshore-dev/lakeshore/internal/planekit"

// rowColumns are the columns scanRow reads, in order: the rowid, then planekit's.
const rowColumns = `seq, ` + planekit.RowColumns

type (
	row     = planekit.Row
	scanner = planekit.Scanner
)

func scanRow(s scanner) (*row, error) { return planekit.ScanRow(s, true) }

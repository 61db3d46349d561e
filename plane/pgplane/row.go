package pgplane

import "github.com/lakeshore-dev/lakeshore/internal/planekit"

// rowColumns are the columns scanRow reads, in order.
const rowColumns = planekit.RowColumns

type (
	row     = planekit.Row
	scanner = planekit.Scanner
)

func scanRow(s scanner) (*row, error) { return planekit.ScanRow(s, false) }

//go:build !go1.27

package hclfast

import "github.com/apparentlymart/go-textseg/v15/textseg"

// scanGraphemeClusters is the segmentation hclsyntax counts columns with: the same textseg
// version, chosen by the same build constraint (hcl's internal/unicodeutil).
var scanGraphemeClusters = textseg.ScanGraphemeClusters
